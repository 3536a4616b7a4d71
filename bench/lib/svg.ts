// A hand-written SVG line chart (no dependency): a few series of (x, y)
// points on linear axes with round ticks, a legend and a title.

export interface Series {
  name: string;
  color: string;
  points: readonly (readonly [number, number])[];
  dashed?: boolean;
}

export interface LineChart {
  title: string;
  subtitle?: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  width?: number;
  height?: number;
}

const escapeXml = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Ticks at 1, 2 or 5 × 10^k covering [0, max], about `count` of them. */
export function niceTicks(max: number, count = 6): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? 10 * pow;
  const ticks: number[] = [];
  for (let v = 0; v < max + step / 2; v += step) ticks.push(Math.round(v * 1e6) / 1e6);
  if (ticks[ticks.length - 1]! < max) ticks.push(ticks[ticks.length - 1]! + step);
  return ticks;
}

const tickLabel = (v: number): string => (Math.abs(v) >= 1000 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v * 100) / 100));

/** The chart as an SVG document. */
export function renderLineChart(c: LineChart): string {
  const width = c.width ?? 860;
  const height = c.height ?? 480;
  const m = { left: 72, right: 24, top: c.subtitle ? 64 : 48, bottom: 56 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  const all = c.series.flatMap((s) => s.points);
  const xTicks = niceTicks(Math.max(1e-9, ...all.map((p) => p[0])));
  const yTicks = niceTicks(Math.max(1e-9, ...all.map((p) => p[1])));
  const xMax = xTicks[xTicks.length - 1]!;
  const yMax = yTicks[yTicks.length - 1]!;
  const x = (v: number) => (m.left + (v / xMax) * plotW).toFixed(1);
  const y = (v: number) => (m.top + plotH - (v / yMax) * plotH).toFixed(1);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${m.left}" y="22" font-size="15" font-weight="bold">${escapeXml(c.title)}</text>`,
  ];
  if (c.subtitle) out.push(`<text x="${m.left}" y="42" fill="#555">${escapeXml(c.subtitle)}</text>`);
  for (const t of yTicks) {
    out.push(`<line x1="${m.left}" x2="${m.left + plotW}" y1="${y(t)}" y2="${y(t)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.left - 6}" y="${y(t)}" text-anchor="end" dominant-baseline="middle" fill="#444">${tickLabel(t)}</text>`);
  }
  for (const t of xTicks) {
    out.push(`<line x1="${x(t)}" x2="${x(t)}" y1="${m.top}" y2="${m.top + plotH}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${x(t)}" y="${m.top + plotH + 16}" text-anchor="middle" fill="#444">${tickLabel(t)}</text>`);
  }
  out.push(`<rect x="${m.left}" y="${m.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#888"/>`);
  out.push(`<text x="${m.left + plotW / 2}" y="${height - 14}" text-anchor="middle">${escapeXml(c.xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${m.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(c.yLabel)}</text>`);
  for (const s of c.series) {
    if (s.points.length === 0) continue;
    const d = s.points.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(p[0])},${y(p[1])}`).join(' ');
    out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
  }
  c.series.forEach((s, i) => {
    const ly = m.top + 14 + i * 18;
    const lx = m.left + 12;
    out.push(`<line x1="${lx}" x2="${lx + 26}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    out.push(`<text x="${lx + 32}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
