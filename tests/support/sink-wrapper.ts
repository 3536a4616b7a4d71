// Test sinks that behave like `inner` except for the writer methods a test overrides.
import type { ExportSink, ExportWriter } from '../../functions/worker/export-sink.ts';

type Overridable = Pick<ExportWriter, 'write' | 'commit' | 'abort'> & { close?: ExportWriter['close'] };

/** `inner`, with each opened writer's methods replaced by what `override(writer)` returns. */
export function wrapSink(inner: ExportSink, override: (w: ExportWriter) => Partial<Overridable>): ExportSink {
  return {
    async open(objectPath, opts) {
      const w = await inner.open(objectPath, opts);
      const o = override(w);
      return {
        get durableBytes() {
          return w.durableBytes;
        },
        upload: w.upload,
        write: o.write ?? ((c) => w.write(c)),
        commit: o.commit ?? (() => w.commit()),
        abort: o.abort ?? (() => w.abort()),
        close: o.close ?? (w.close ? () => w.close!() : undefined),
      };
    },
  };
}
