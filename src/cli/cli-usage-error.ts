/**
 * A command-line usage error of pagellm's own, beyond what commander checks (no prompt given, no model at the path,
 * a chat model without a template). Its message says what the user sent and how to fix it; the CLI prints the
 * message alone and exits with status 1.
 */
export class CliUsageError extends Error {
  override readonly name = 'CliUsageError';
}
