// The table of requests: id, queue, priority, prompt / output / cached tokens, and each sequence's block table as
// a row of physical block ids (shared ones marked with their ref count, swapped ones marked as CPU ids).
import { blockTableOf, ownersOf } from './snapshot-codec.js';

/** Block ids shown per sequence at most; the rest are counted. */
const MAX_IDS_SHOWN = 96;

function escapeHtml(s) {
  return String(s).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
  );
}

function shortId(id) {
  return id.length > 22 ? `${id.slice(0, 10)}…${id.slice(-8)}` : id;
}

/** The HTML of one block table. */
function blockTableHtml(snap, seq) {
  const ids = blockTableOf(snap, seq);
  if (ids.length === 0) return '<span class="muted">no blocks</span>';
  const numGpu = snap.config.numGpuBlocks;
  const parts = [];
  const shown = Math.min(ids.length, MAX_IDS_SHOWN);
  for (let k = 0; k < shown; k++) {
    const id = ids[k];
    const rc = id >= 0 ? snap.refCount[id] : 0;
    const multi = id >= 0 && ownersOf(snap, id).length > 1;
    const cls = ['bid'];
    if (rc > 1) cls.push('shared');
    if (multi) cls.push('cross');
    if (id >= numGpu) cls.push('cpu');
    const sup = rc > 1 ? `<sup>×${rc}</sup>` : '';
    parts.push(`<span class="${cls.join(' ')}" data-block="${id}">${id}${sup}</span>`);
  }
  if (ids.length > shown) parts.push(`<span class="muted">… +${ids.length - shown} more</span>`);
  return parts.join('');
}

const SEQ_STATUS = {
  WAITING: 'waiting',
  RUNNING: 'running',
  SWAPPED: 'swapped',
  FINISHED_STOPPED: 'stopped',
  FINISHED_LENGTH_CAPPED: 'length',
  FINISHED_ABORTED: 'aborted',
  FINISHED_IGNORED: 'ignored',
};

/**
 * Renders the request table of `snap` into `tbody`, and the row count note into `note`. Swatches take the colours
 * of `snap.requestColors` (one { css } per request, from the page's RequestPalette).
 */
export function renderRequestTable(tbody, note, snap) {
  const rows = [];
  snap.requests.forEach((r, index) => {
    const color = snap.requestColors[index].css;
    const many = r.seqs.length > 1;
    const attrs = `data-request-index="${index}" data-request-id="${escapeHtml(r.requestId)}" data-queue="${r.queue}"`;
    rows.push(
      `<tr class="req" ${attrs}>` +
        `<td><span class="swatch" style="background:${color}"></span><span class="rid" title="${escapeHtml(r.requestId)}">` +
        `${escapeHtml(shortId(r.requestId))}</span>${many ? ` <span class="muted">n=${r.seqs.length}</span>` : ''}</td>` +
        `<td><span class="badge ${r.queue}">${r.queue}</span></td>` +
        `<td class="num">${r.priority}</td>` +
        `<td class="num">${r.promptTokens}</td>` +
        `<td class="num">${r.outputTokens}</td>` +
        `<td class="num">${r.cachedTokens}</td>` +
        `<td class="table">${many ? '' : blockTableHtml(snap, r.seqs[0])}</td></tr>`,
    );
    if (many) {
      for (const s of r.seqs) {
        rows.push(
          `<tr class="seq" ${attrs} data-seq-id="${s.seqId}">` +
            `<td class="seqlabel">seq ${s.seqId}</td><td><span class="muted">${SEQ_STATUS[s.status] ?? s.status}</span></td>` +
            `<td></td><td></td><td class="num">${s.outputTokens}</td><td></td>` +
            `<td class="table">${blockTableHtml(snap, s)}</td></tr>`,
        );
      }
    }
  });
  if (rows.length === 0)
    rows.push('<tr><td colspan="7" class="muted empty">no requests — the engine is idle</td></tr>');
  tbody.innerHTML = rows.join('');
  const listed = snap.requests.length;
  note.textContent =
    snap.numWaitingNotListed > 0
      ? `${listed} listed, ${snap.numWaitingNotListed} more waiting`
      : `${listed} request${listed === 1 ? '' : 's'}`;
}

/** The block ids of request `index` (all its sequences), as a Set. */
export function blocksOfRequest(snap, index) {
  const ids = new Set();
  for (const s of snap.requests[index].seqs) for (const id of blockTableOf(snap, s)) ids.add(id);
  return ids;
}
