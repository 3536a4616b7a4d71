// The idle lanes' poll (functions/worker/linger.ts): its pause doubles while
// the looks find nothing, and work found, a lane gone idle or a wake-up
// request brings it back to LINGER_POLL_MS (a wake-up request looks at once). Fake check and sleep: no database.
import { describe, expect, it } from 'vitest';
import { IdleLanes, LINGER_POLL_MAX_MS, LINGER_POLL_MS } from '../functions/worker/linger.ts';

/** An IdleLanes whose check answers from `answers` (then false) and whose sleeps are recorded and resolved at once. */
function fakeLanes(answers: boolean[]) {
  const pauses: number[] = [];
  let looks = 0;
  const lanes = new IdleLanes(
    async () => {
      looks++;
      return answers.shift() ?? false;
    },
    async (ms) => {
      pauses.push(ms);
      await new Promise((resolve) => setImmediate(resolve));
    },
  );
  return { lanes, pauses, looks: () => looks };
}

describe('idle lanes poll', () => {
  it('doubles its pause while nothing is found, up to LINGER_POLL_MAX_MS, and starts again short when work is found', async () => {
    const { lanes, pauses } = fakeLanes([false, false, false, false, false, false, false, true]);
    let stop = false;
    const woken = lanes.wait(() => stop);
    expect(await woken).toBe(true);
    lanes.claimed(false); // the woken lane's claim found nothing after all
    // One more look at the short pause (work was just found), then the lane stops lingering.
    const second = lanes.wait(() => stop);
    await new Promise((resolve) => setTimeout(resolve, 20));
    stop = true;
    expect(await second).toBe(false);
    // Doubling from LINGER_POLL_MS until the next would pass LINGER_POLL_MAX_MS, then the cap.
    const doubling = [LINGER_POLL_MS];
    while (doubling.length < 7 && doubling.at(-1)! * 2 < LINGER_POLL_MAX_MS) doubling.push(doubling.at(-1)! * 2);
    const looks = [...doubling, LINGER_POLL_MAX_MS, LINGER_POLL_MAX_MS, LINGER_POLL_MAX_MS].slice(0, 8);
    expect(pauses.slice(0, 9)).toEqual([...looks, LINGER_POLL_MS]);
  });

  it('a lane gone idle after a job starts the doubling again; one out of schedule probes leaves the pause as it is', async () => {
    const { lanes, pauses } = fakeLanes([]);
    let stop = false;
    const first = lanes.wait(() => stop);
    while (pauses.length < 4) await new Promise((resolve) => setImmediate(resolve));
    const second = lanes.wait(() => stop, false);
    const at = pauses.length;
    while (pauses.length < at + 1) await new Promise((resolve) => setImmediate(resolve));
    expect(pauses[at]).toBeGreaterThan(4 * LINGER_POLL_MS);
    const third = lanes.wait(() => stop);
    const at3 = pauses.length;
    while (pauses.length < at3 + 1) await new Promise((resolve) => setImmediate(resolve));
    expect(pauses[at3]).toBeLessThanOrEqual(2 * LINGER_POLL_MS);
    stop = true;
    expect([await first, await second, await third]).toEqual([false, false, false]);
  });

  it('a wake-up request looks at once and starts the doubling again from LINGER_POLL_MS', async () => {
    const { lanes, pauses } = fakeLanes([]);
    let stop = false;
    const waiting = lanes.wait(() => stop);
    while (pauses.length < 7) await new Promise((resolve) => setImmediate(resolve));
    expect(pauses.at(-1)).toBe(LINGER_POLL_MAX_MS);
    lanes.nudge();
    const at = pauses.length;
    while (pauses.length < at + 2) await new Promise((resolve) => setImmediate(resolve));
    stop = true;
    expect(await waiting).toBe(false);
    expect(pauses.slice(at, at + 2)).toEqual([2 * LINGER_POLL_MS, 4 * LINGER_POLL_MS]);
  });
});
