import type { FastifyReply } from 'fastify';

/**
 * Calls `abort` if the client closes the connection before the response is complete; returns a function that stops
 * watching. Mirrors vLLM's `with_cancellation` / `listen_for_disconnect` (vllm/entrypoints/utils.py).
 */
export function abortOnClientClose(reply: FastifyReply, abort: () => void): () => void {
  const onClose = (): void => {
    if (!reply.raw.writableFinished) abort();
  };
  reply.raw.on('close', onClose);
  return () => reply.raw.off('close', onClose);
}
