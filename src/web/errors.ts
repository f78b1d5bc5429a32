/**
 * Errors of the dashboard's HTTP routes. Each carries the HTTP status it is answered with (`statusCode`, which
 * fastify and the server's error handler both honour).
 */
export class DashboardError extends Error {
  override readonly name: string = 'DashboardError';
  /** HTTP status of the answer. */
  readonly statusCode: number;

  constructor(statusCode: number, message: string) {
    super(message);
    this.statusCode = statusCode;
  }
}

/** A block id that is not an integer in [0, numGpuBlocks + numCpuBlocks): answered with 404. */
export class UnknownBlockError extends DashboardError {
  override readonly name = 'UnknownBlockError';

  constructor(message: string) {
    super(404, message);
  }
}
