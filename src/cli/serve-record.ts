/**
 * `mempo serve --record FILE`: every episode finished through POST /v1/episodes/{id}/finish is
 * appended to FILE as one JSON line ({ id, calls, tokens, finished, lastSeen }, the calls as
 * src/agents/capture.ts records them) and fsynced before the finish is answered, then dropped
 * from memory. A line is written whole or not at all: a failed write is cut back to the file's
 * length before it, the finish answers 500 and the episode waits in memory for the next try.
 * On SIGTERM/SIGINT `close` writes the finished episodes still waiting and names on stderr those
 * never finished (and those that expired), which are not written.
 */
import { closeSync, existsSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { EpisodeRecorder, type CapturedEpisode } from '../agents/capture';
import { MempoError } from '../errors';

export class EpisodeLog {
  readonly recorder = new EpisodeRecorder();
  private fd: number | undefined;
  written = 0;

  constructor(readonly file: string) {
    if (existsSync(file)) checkWholeLines(file);
    try {
      this.fd = openSync(file, 'a');
    } catch (err) {
      throw new MempoError('ERR_INVALID_OPTION', `--record ${file}: cannot open it for appending (${(err as Error).message})`);
    }
  }

  /** Appends one episode as a line and fsyncs it; on failure the file is as it was and this throws. */
  write(e: CapturedEpisode): void {
    if (this.fd === undefined) throw new MempoError('ERR_INVALID_INPUT', `--record ${this.file} is closed`);
    const line = Buffer.from(`${JSON.stringify({ id: e.id, calls: e.calls, tokens: e.tokens, finished: e.finished, lastSeen: e.lastSeen })}\n`, 'utf8');
    const size = fstatSync(this.fd).size;
    try {
      let at = 0;
      while (at < line.length) at += writeSync(this.fd, line, at, line.length - at);
      fsyncSync(this.fd);
    } catch (err) {
      // Only the bytes of this line are cut: what the file held before stays.
      try {
        ftruncateSync(this.fd, size);
      } catch {
        // the write error below is the one to report
      }
      throw new MempoError('ERR_INVALID_INPUT', `--record ${this.file}: episode ${e.id} not written (${(err as Error).message})`);
    }
    this.written++;
  }

  /** What the server calls on each finish: the line, then the episode leaves memory. */
  onFinished = (e: CapturedEpisode): void => {
    this.write(e);
    this.recorder.take(e.id);
  };

  /** Writes the finished episodes still in memory, names the rest on `stderr`, closes the file. */
  close(stderr: { write(s: string): unknown }): void {
    const left: string[] = [];
    for (const e of this.recorder.episodes()) {
      if (!e.finished) {
        left.push(e.id);
        continue;
      }
      try {
        this.onFinished(e);
      } catch (err) {
        stderr.write(`mempo serve: ${(err as Error).message}\n`);
      }
    }
    if (left.length > 0) stderr.write(`mempo serve: ${left.length} episode(s) never finished, not written to ${this.file}: ${left.join(', ')}\n`);
    const expired = this.recorder.expired;
    if (expired.length > 0) stderr.write(`mempo serve: ${expired.length} episode(s) expired unfinished, not written: ${expired.join(', ')}\n`);
    stderr.write(`mempo serve: ${this.written} episode(s) written to ${this.file}\n`);
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** A file that does not end with a newline holds a cut line (a crash mid-write elsewhere): appending would join two. */
function checkWholeLines(file: string): void {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size === 0) return;
    const last = Buffer.alloc(1);
    readSync(fd, last, 0, 1, size - 1);
    if (last[0] !== 0x0a) throw new MempoError('ERR_INPUT_FILE', `--record ${file}: its last line is not whole (no newline at the end); repair or move the file, mempo appends only after whole lines`);
  } finally {
    closeSync(fd);
  }
}
