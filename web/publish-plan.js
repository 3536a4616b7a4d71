// The Publish view's plan: the status chips (counts, and the filter of the
// items list), the paged diff of items (each patched field before → after;
// HubSpot's current value beside ours for a conflict; HubSpot's message for an
// invalid item; the revision of an overwritten one) and the pager. DOM only;
// what a status is called is publish-status.js's, the loading publish-view.js's.
import { div, node } from './page.js';
import { itemView, LABELS_OF, showValue, toneOfItem } from './publish-status.js';
import { typeLabel } from './status.js';

/**
 * The chips: "All" and one per status of the phase's field, each with its count
 * when known (`counts`: { status: n } or null), the one filtered on pressed.
 */
export function renderChips(box, field, counts, total, filter, onFilter, { scheduled = false } = {}) {
  const labels = LABELS_OF[field];
  // Passing states have no chip; `scheduled` only for a plan that schedules.
  const statuses = Object.keys(labels).filter((s) => s !== 'writing' && s !== 'restoring' && (s !== 'scheduled' || scheduled));
  const chip = (value, label, n) => {
    const b = node('button', { type: 'button', onclick: () => onFilter(value) }, label, n === null || n === undefined ? null : node('b', { textContent: n.toLocaleString() }));
    b.dataset.filter = value;
    if (n !== null && n !== undefined) b.dataset.count = String(n);
    if (value) b.className = `tone-${toneOfItem(value)}`;
    b.setAttribute('aria-pressed', String(filter === value));
    return b;
  };
  box.replaceChildren(
    chip('', 'All', total),
    ...statuses.map((s) => chip(s, labels[s], counts ? counts[s] ?? 0 : null)),
  );
  box.dataset.field = field;
}

/** The diff: one row per patched field, the item's name and status spanning its rows. */
export function renderItems(box, items, field, { empty = 'No item.' } = {}) {
  if (!items.length) {
    box.replaceChildren(node('p', { className: 'muted', textContent: empty }));
    return;
  }
  const views = items.map((i) => ({ item: i, v: itemView(i, field) }));
  const withCurrent = views.some(({ v }) => v.fields.some((f) => f.current !== undefined));
  const head = node('tr', {},
    node('th', { className: 'item', textContent: 'Item' }), node('th', { className: 'field', textContent: 'Field' }),
    node('th', { textContent: 'Before (HubSpot)' }), node('th', { textContent: 'After (yours)' }),
    withCurrent ? node('th', { textContent: 'HubSpot now', title: "HubSpot's value when the conflict was found: kept, not overwritten" }) : null,
    node('th', { className: 'status', textContent: 'Status' }),
  );
  const t = node('table', { className: `diff${withCurrent ? ' with-current' : ''}` }, head);
  for (const { item, v } of views) {
    const fields = v.fields.length ? v.fields : [{ field: '—', before: undefined, after: undefined, current: undefined }];
    fields.forEach((f, k) => {
      const tr = node('tr');
      Object.assign(tr.dataset, { itemId: item.id, hubspotId: item.hubspotId, contentType: item.contentType, field: f.field, status: v.status });
      if (k === 0) {
        tr.className = 'item-first';
        tr.append(node('td', { rowSpan: fields.length, className: 'item' },
          node('b', { textContent: item.hubspotId }), node('div', { className: 'muted', textContent: typeLabel(item.contentType) })));
      }
      tr.append(node('td', { className: 'field', textContent: f.field }), cell('before', f.before), cell('after', f.after));
      if (withCurrent) tr.append(cell('current', f.current));
      if (k === 0) {
        tr.append(node('td', { rowSpan: fields.length, className: 'status' },
          node('span', { className: `pill tone-${v.tone}`, textContent: v.label }),
          v.message ? node('div', { className: 'muted item-message wrap-anywhere', textContent: v.message }) : null));
      }
      t.append(tr);
    });
  }
  box.replaceChildren(div('scroll', t));
}

function cell(cls, value) {
  if (value === undefined) return node('td', { className: `${cls} none`, textContent: '—' });
  const text = showValue(value);
  const td = node('td', { className: `${cls} value wrap-anywhere`, textContent: text.length > 300 ? `${text.slice(0, 300)}…` : text });
  if (text.length > 300) td.title = text;
  if (value === null) td.classList.add('empty');
  return td;
}
