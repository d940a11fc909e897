// The p2c balancer and the peak EWMA it reads: a slow reply counts at once, fast ones pull the
// average down gradually, a quiet endpoint's average decays; of two endpoints the cheaper
// ((load + 1) × latency / weight) goes first, and one that must load the model loses to one that has it.
import { describe, expect, it } from 'vitest';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { DECAY_MS, PeakEwma } from '../../../engine/backends/peak-ewma.js';
import { p2cCost, STRATEGIES } from '../../../plugins/routing/balancing.js';

describe('peak EWMA', () => {
  it('takes a slower sample at once, a faster one gradually, and decays while quiet', () => {
    const e = new PeakEwma();
    expect(e.value(0)).toBe(0);
    e.record(100, 0);
    e.record(400, 10);
    expect(e.value(10)).toBe(400);
    e.record(100, 20);
    const after = e.value(20);
    expect(after).toBeLessThan(400);
    expect(after).toBeGreaterThan(390);
    expect(e.value(20 + DECAY_MS)).toBeCloseTo(after / Math.E, 5);
  });
});

/** A stand-in endpoint with a load and a latency average. */
function node(name: string, load: number, latencyMs: number, weight = 1) {
  const latency = new PeakEwma();
  if (latencyMs > 0) latency.record(latencyMs, performance.now());
  return { name, weight, priority: 1, latency, load: () => load } as unknown as Endpoint;
}

describe('p2c', () => {
  it('cost: (load + 1) × latency per unit of weight; an unmeasured endpoint as fast as its peers', () => {
    const now = performance.now();
    expect(p2cCost(node('a', 1, 100), now)).toBeCloseTo(200, 0);
    expect(p2cCost(node('a', 1, 100, 2), now)).toBeCloseTo(100, 0);
    expect(p2cCost(node('new', 2, 0), now, 80)).toBe(240);
  });

  it('a new endpoint gets traffic as its load allows, not all of it nor none', () => {
    const order = STRATEGIES.p2c();
    expect(order([node('busy', 3, 100), node('new', 0, 0)])[0].name).toBe('new');
    expect(order([node('idle', 0, 100), node('new', 3, 0)])[0].name).toBe('idle');
  });

  it('with two candidates the cheaper always goes first, the other is the failover', () => {
    const order = STRATEGIES.p2c();
    const fast = node('fast', 0, 50);
    const slow = node('slow', 0, 500);
    for (let i = 0; i < 50; i++) expect(order([slow, fast]).map((e) => e.name)).toEqual(['fast', 'slow']);
  });

  it('never picks the dearest of three (it loses every draw it is in)', () => {
    const order = STRATEGIES.p2c();
    const list = [node('a', 0, 100), node('b', 0, 120), node('worst', 9, 900)];
    const firsts = new Set(Array.from({ length: 200 }, () => order(list)[0].name));
    expect(firsts.has('worst')).toBe(false);
    expect(firsts).toEqual(new Set(['a', 'b']));
  });

  it('an endpoint that must load the model loses to one that has it, however fast', () => {
    const cold = node('cold', 0, 10);
    const warm = node('warm', 3, 900);
    const order = STRATEGIES.p2c({ cold: (ep) => ep === cold });
    for (let i = 0; i < 20; i++) expect(order([cold, warm], null, 'llama3')[0].name).toBe('warm');
    // Without a model to ask about, cost alone.
    expect(order([cold, warm])[0].name).toBe('cold');
  });
});
