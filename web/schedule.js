// The portal's sync schedule on the Sync view: set it (changes every N
// minutes, a full reconcile every M), pause and resume it, delete it; shows
// when the next sync and the next reconcile are due (GET /orchestrator/sync's
// schedule and nextSyncAt; POST set_sync_schedule / delete_sync_schedule).
// The answer to a change is shown at once (the card and the summary's next
// sync), not the schedule as it was until the next refresh; its outcome is
// said in the card's own line.
import { duration, scheduleText } from './status.js';

const $ = (id) => document.getElementById(id);
const node = (tag, props = {}, ...children) => {
  const n = Object.assign(document.createElement(tag), props);
  for (const c of children) if (c !== null && c !== undefined) n.append(c);
  return n;
};
const sched = { api: null, refreshAll: null, say: null, sayError: null, portalId: () => null, sync: () => null, editing: false };

const dueIn = (iso, now) => {
  if (!iso) return '—';
  const s = (Date.parse(iso) - now) / 1000;
  return s > 0 ? `in ${duration(s)}` : 'due now';
};

export function initSchedule({ api, refreshAll, say, sayError, portalId, sync }) {
  Object.assign(sched, { api, refreshAll, say, sayError, portalId, sync });
  $('schedule-save').onclick = () => save();
  $('schedule-pause').onclick = () => set({ paused: !sched.sync()?.schedule?.paused });
  $('schedule-delete').onclick = async () => {
    if (!confirm('Delete the sync schedule? No sync starts by itself any more; you can schedule again at any time.')) return;
    try {
      await sched.api('', { method: 'POST', body: { action: 'delete_sync_schedule', portalId: sched.portalId() } });
      shown(null);
      say('Schedule deleted: syncs run only when you start them.');
    } catch (e) {
      sayError(e);
    }
    await refreshAll();
  };
  for (const id of ['schedule-incremental', 'schedule-full']) $(id).oninput = () => (sched.editing = true);
}

async function set(fields, message) {
  try {
    const { schedule } = await sched.api('', { method: 'POST', body: { action: 'set_sync_schedule', portalId: sched.portalId(), ...fields } });
    sched.editing = false;
    shown(schedule);
    sched.say(message ?? (schedule.paused ? 'Schedule paused: no sync starts by itself until you resume it.' : `Schedule: ${scheduleText(schedule)}.`));
  } catch (e) {
    sched.sayError(e);
  }
  await sched.refreshAll();
}

/**
 * The schedule as the change's answer says, shown at once: until the refresh after it, the card and the
 * summary's next sync would show the schedule as it was (its old times, its old intervals in the inputs).
 */
function shown(schedule) {
  const s = sched.sync();
  if (!s || s.portalId !== sched.portalId()) return;
  s.schedule = schedule;
  const times = schedule && !schedule.paused ? [schedule.nextIncrementalAt, schedule.nextFullAt].filter(Boolean).sort() : [];
  s.nextSyncAt = times[0] ?? null;
  renderSchedule();
}

function save() {
  const minutes = (id) => ($(id).value === '' ? null : Number($(id).value));
  set({ incrementalEveryMinutes: minutes('schedule-incremental'), fullEveryMinutes: minutes('schedule-full') });
}

export function renderSchedule(now = Date.now()) {
  const s = sched.sync();
  const card = $('schedule-card');
  card.hidden = !sched.portalId();
  if (card.hidden) return;
  const schedule = s?.schedule ?? null;
  card.dataset.state = !schedule ? 'none' : schedule.paused ? 'paused' : 'active';
  if (!sched.editing) {
    $('schedule-incremental').value = schedule ? (schedule.incrementalEveryMinutes ?? '') : '15';
    $('schedule-full').value = schedule ? (schedule.fullEveryMinutes ?? '') : '1440';
  }
  $('schedule-save').textContent = schedule ? 'Save' : 'Schedule syncs';
  $('schedule-pause').hidden = !schedule;
  $('schedule-pause').textContent = schedule?.paused ? 'Resume' : 'Pause';
  $('schedule-delete').hidden = !schedule;
  const facts = [];
  if (!schedule) facts.push(node('span', { className: 'muted', textContent: 'No schedule: syncs run only when you start them.' }));
  else {
    facts.push(node('span', {}, node('b', { id: 'schedule-text', textContent: scheduleText(schedule) })));
    if (schedule.paused) facts.push(node('span', { className: 'tone-wait', textContent: 'paused: nothing starts by itself' }));
    else {
      if (schedule.incrementalEveryMinutes) facts.push(node('span', {}, 'next changes ', node('b', { id: 'schedule-next', textContent: dueIn(schedule.nextIncrementalAt, now) })));
      if (schedule.fullEveryMinutes) facts.push(node('span', {}, 'next full reconcile ', node('b', { id: 'schedule-reconcile', textContent: dueIn(schedule.nextFullAt, now) })));
    }
  }
  $('schedule-facts').replaceChildren(...facts);
}
