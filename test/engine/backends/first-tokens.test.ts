import { describe, expect, it } from 'vitest';
import { FirstTokenTimes, FLOOR_MS } from '../../../engine/backends/first-tokens.js';

describe('first-token times', () => {
  it('a deadline once three are known: four times the longest of the last eight, at least the floor', () => {
    const t = new FirstTokenTimes();
    t.record('m', 500, 900);
    t.record('m', 500, 1_000);
    expect(t.deadline('m', 500)).toBe(0);
    t.record('m', 500, 1_100);
    expect(t.deadline('m', 500)).toBe(4_400);
    for (let i = 0; i < 8; i++) t.record('m', 500, 100);
    expect(t.deadline('m', 500)).toBe(FLOOR_MS);
  });

  it("per model and prompt size (by doubling from 1 KiB); a new model takes the endpoint's", () => {
    const t = new FirstTokenTimes();
    for (let i = 0; i < 3; i++) t.record('m', 100, 2_000);
    expect([t.deadline('m', 1023), t.deadline('m', 1024)]).toEqual([8_000, 0]);
    // A model too new for times of its own: the endpoint's.
    expect(t.deadline('other', 100)).toBe(8_000);
    for (let i = 0; i < 3; i++) t.record('other', 100, 100);
    expect(t.deadline('other', 100)).toBe(FLOOR_MS);
    for (let i = 0; i < 3; i++) t.record('m', 40_000, 5_000);
    expect([t.deadline('m', 33_000), t.deadline('m', 64_000), t.deadline('m', 70_000)]).toEqual([20_000, 20_000, 0]);
  });
});
