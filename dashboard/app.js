// The dashboard: polls the gateway's status routes with If-None-Match (a 304 keeps the last
// data), draws the rate, latency and error charts from successive polls of the counters, and
// renders the three tabs. Plain browser JavaScript, no build step; everything from this origin.
'use strict';

const params = new URLSearchParams(location.search);
// Seconds between polls: 10 by default (the spec's 5 to 15), ?interval=N for tests and demos.
const INTERVAL_S = Math.min(Math.max(Number(params.get('interval')) || 10, 1), 60);
const HISTORY_S = 10 * 60; // the charts show the last ten minutes
const ROUTES = {
  status: '/internal/status',
  endpoints: '/internal/status/endpoints',
  models: '/internal/status/models',
  translators: '/internal/stats/translators',
};
/** Polled besides, while API keys are on (it answers keys_on: false otherwise). */
const USAGE = '/internal/usage';

const cache = new Map(); // url → { etag, data }
const history = { t: [], rate: [], latency: [], errors: [] };
let previous = null; // the last counters seen: { t, total, failed, avgMs }
const charts = {};

/** GET JSON with the last ETag; a 304 answers with the data we already have. */
async function poll(url) {
  const known = cache.get(url);
  const res = await fetch(url, { cache: 'no-store', headers: known ? { 'if-none-match': known.etag } : {} });
  if (res.status === 304 && known) return known.data;
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  const data = await res.json();
  cache.set(url, { etag: res.headers.get('etag') || '', data });
  return data;
}

/** "12.5ms", "1.2s", "2.5m" (the gateway's formatDuration) → milliseconds. */
function ms(text) {
  const m = /^([\d.]+)(ms|s|m)$/.exec(String(text));
  if (!m) return 0;
  return Number(m[1]) * (m[2] === 'ms' ? 1 : m[2] === 's' ? 1000 : 60000);
}

/** Milliseconds for people: "5.5 ms", "1.24 s". */
function fmt(msValue) {
  if (msValue === null || msValue === undefined) return '—';
  return msValue < 1000 ? `${msValue < 10 ? msValue.toFixed(1) : Math.round(msValue)} ms` : `${(msValue / 1000).toFixed(2)} s`;
}

/** fmt without the unit, for "1.6 / 4.8 ms". */
function short(msValue) {
  return fmt(msValue).replace(/ (ms|s)$/, '');
}

/** An uptime: "42 s", "17 min", "5 h 12 min", "3 d 4 h". */
function since(msValue) {
  const s = Math.floor(msValue / 1000),
    m = Math.floor(s / 60),
    h = Math.floor(m / 60),
    d = Math.floor(h / 24);
  return d ? `${d} d ${h % 24} h` : h ? `${h} h ${m % 60} min` : m ? `${m} min` : `${s} s`;
}

/** A DOM element with text only (never HTML): names come from backends. */
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === 'class') node.className = v;
    else if (k === 'title') node.title = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

function fill(tbody, rows, columns) {
  tbody.replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { class: 'empty', colspan: String(columns) }, 'none yet'))]));
}

function dot(state) {
  return el('span', { class: `dot ${state}` });
}

// --- charts ---------------------------------------------------------------------------------

/** The time axis: the span polled so far, at least a minute, at most HISTORY_S, ending now. */
function xRange() {
  const now = Date.now() / 1000;
  const span = Math.min(Math.max(now - (history.t[0] || now), 60), HISTORY_S);
  return [now - span, now];
}

function makeChart(id, label, color) {
  const box = document.getElementById(id);
  const opts = {
    width: Math.max(box.clientWidth, 300),
    height: 160,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true, range: xRange }, y: { range: (_u, _min, max) => [0, Math.max(max || 0, 1) * 1.15] } },
    axes: [
      { stroke: '#6b7385', grid: { stroke: '#eef0f4' } },
      { stroke: '#6b7385', grid: { stroke: '#eef0f4' }, size: 48 },
    ],
    series: [{}, { label, stroke: color, width: 2, fill: `${color}1a`, points: { show: true, size: 4, fill: color } }],
  };
  charts[id] = new uPlot(opts, [[], []], box);
}

function record(status) {
  const t = Date.now() / 1000;
  const now = { t, total: status.statistics.requests_total, failed: status.statistics.requests_failed, avgMs: ms(status.statistics.average_latency) };
  if (previous && t > previous.t) {
    const requests = Math.max(now.total - previous.total, 0);
    const failed = Math.max(now.failed - previous.failed, 0);
    history.t.push(t);
    history.rate.push(requests / (t - previous.t));
    // The interval's own average latency, from the running averages before and after it.
    history.latency.push(requests ? Math.max((now.avgMs * now.total - previous.avgMs * previous.total) / requests, 0) : null);
    history.errors.push(requests ? (failed / requests) * 100 : 0);
    while (history.t.length && history.t[0] < t - HISTORY_S) for (const k of Object.keys(history)) history[k].shift();
  }
  previous = now;
  charts['chart-rate'].setData([history.t, history.rate]);
  charts['chart-latency'].setData([history.t, history.latency]);
  charts['chart-errors'].setData([history.t, history.errors]);
  // The latest value beside each chart's title.
  const last = (list) => (list.length ? list[list.length - 1] : null);
  const latency = last(history.latency);
  document.querySelector('#chart-rate-now').textContent = history.t.length ? `${last(history.rate).toFixed(2)} now` : '';
  document.querySelector('#chart-latency-now').textContent = latency === null ? '' : `${fmt(latency)} now`;
  document.querySelector('#chart-errors-now').textContent = history.t.length ? `${last(history.errors).toFixed(1)}% now` : '';
}

// --- the tabs ---------------------------------------------------------------------------------

function card(label, value, cls) {
  return el('div', { class: 'card' }, el('div', { class: 'label' }, label), el('div', { class: `value ${cls || ''}` }, value));
}

function renderOverview(status, endpoints, translators) {
  document.getElementById('version').textContent = `v${status.version}`;
  const s = status.statistics,
    sys = status.system;
  document
    .getElementById('cards')
    .replaceChildren(
      card('Status', el('span', { class: sys.status }, dot(sys.status), ' ', sys.status)),
      card('Routable endpoints', `${sys.endpoints_routable} / ${sys.endpoints_total}`),
      card('Requests', s.requests_total.toLocaleString()),
      card('Active now', s.requests_active),
      card('Success rate', sys.success_rate),
      card('Average latency', fmt(ms(s.average_latency))),
      card('p95 / p99', `${short(ms(s.p95_latency))} / ${fmt(ms(s.p99_latency))}`),
      card('Uptime', since(ms(sys.uptime))),
    );
  document
    .getElementById('health-strip')
    .replaceChildren(
      ...endpoints.endpoints.map((e) =>
        el(
          'span',
          { class: `pill ${e.routable ? 'healthy' : 'unhealthy'}`, 'data-endpoint': e.name, title: e.error || e.status },
          dot(''),
          e.name,
          el('span', { class: 'muted' }, e.status),
        ),
      ),
    );
  fill(
    document.querySelector('#translators tbody'),
    translators.translators.map((t) =>
      el(
        'tr',
        {},
        el('td', {}, t.translator_name),
        el('td', { class: 'num' }, t.total_requests),
        el('td', { class: 'num' }, t.success_rate),
        el('td', { class: 'num' }, t.passthrough_requests),
        el('td', { class: 'num' }, t.translation_requests),
        el('td', { class: 'num' }, t.streaming_requests),
        el('td', { class: 'num' }, t.total_requests ? fmt(ms(t.average_latency)) : '—'),
        el('td', { class: 'num' }, t.malformed_chunks),
      ),
    ),
    8,
  );
}

function renderEndpoints(endpoints) {
  fill(
    document.querySelector('#endpoint-table tbody'),
    endpoints.endpoints.map((e) =>
      el(
        'tr',
        { 'data-endpoint': e.name },
        el('td', {}, el('strong', {}, e.name), turnsLine(e.queue)),
        el('td', {}, e.type),
        el('td', { class: 'url', title: e.url }, e.url),
        el('td', { class: 'health', title: e.error || '' }, dot(e.status), ' ', e.status),
        el('td', { class: 'breaker' }, dot(e.circuit_breaker.state), ' ', e.circuit_breaker.state),
        el('td', { class: 'num' }, e.requests),
        el('td', { class: 'num' }, `${e.errors} (${e.error_rate})`),
        el('td', { class: 'num' }, e.requests ? fmt(ms(e.average_latency)) : '—'),
        el('td', { class: 'num load', title: loadTitle(e.load) }, e.load.total),
        el('td', { class: 'num' }, e.weight),
        el('td', { class: 'num' }, e.latency_ewma === null ? '—' : fmt(ms(e.latency_ewma))),
        el('td', { class: 'num' }, `${Number(e.uptime_percentage).toFixed(1)}%`),
        el('td', {}, e.last_check ? new Date(e.last_check).toLocaleTimeString() : '—'),
        el('td', { class: 'error' }, e.error || ''),
      ),
    ),
    14,
  );
}

/** An engine that holds few models at once (model_switching): what it holds or loads, who waits
 *  for which model, the switches made and the longest wait; nothing for other endpoints. */
function turnsLine(queue) {
  const t = queue?.model_switching;
  if (!t) return '';
  const waiting = Object.entries(t.waiting_by_model).map(([model, n]) => `${model} ${n}`);
  const parts = [
    t.loading ? `loading ${t.loading}` : `holds ${t.held.join(', ') || 'nothing yet'}`,
    waiting.length ? `waiting: ${waiting.join(', ')}` : 'nobody waiting',
    `${t.switches} switches`,
    `longest wait ${t.longest_wait}`,
  ];
  return el(
    'div',
    { class: 'muted turns', title: `serves by model: ${t.models_at_once} at once, max_wait ${t.max_wait}, min_dwell ${t.min_dwell}` },
    parts.join(' · '),
  );
}

/** Where an endpoint's load comes from: this gateway's requests, and what the engine reported. */
function loadTitle(load) {
  const own = `${load.in_flight} in flight from this gateway`;
  const engine = load.engine;
  return engine
    ? `${own}; the engine reports ${engine.running} running, ${engine.waiting} waiting (${engine.others} for others) at ${new Date(engine.read_at).toLocaleTimeString()} from ${engine.from}`
    : `${own}; no engine report`;
}

function renderModels(models, endpoints) {
  const names = new Map(endpoints.endpoints.map((e) => [e.id, e.name]));
  document.getElementById('models-summary').textContent = `${models.total} models from ${Object.keys(models.by_provider).length} families`;
  const byFamily = new Map();
  for (const m of models.models) (byFamily.get(m.provider) || byFamily.set(m.provider, []).get(m.provider)).push(m);
  document
    .getElementById('families')
    .replaceChildren(
      ...[...byFamily]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([family, list]) =>
          el(
            'div',
            { class: 'family', 'data-family': family },
            el('h3', {}, family, ' ', el('span', { class: 'muted' }, `(${list.length})`)),
            el(
              'ul',
              {},
              ...list.map((m) =>
                el(
                  'li',
                  { title: `served by ${m.endpoint_ids.map((id) => names.get(id) || id).join(', ')}` },
                  dot(m.available ? 'healthy' : 'unhealthy'),
                  m.id,
                  el(
                    'span',
                    { class: 'ctx' },
                    ...(m.capabilities || []).filter((c) => c !== 'chat' && c !== 'completion').map((c) => el('span', { class: 'tag' }, c)),
                    m.context_window ? `${Math.round(m.context_window / 1024)}k ctx` : '',
                  ),
                ),
              ),
            ),
          ),
        ),
    );
}

/** A count for people: 12,345. */
const count = (n) => Number(n).toLocaleString('en');

function renderUsage(usage) {
  document.querySelector('nav a[data-tab="usage"]').hidden = !usage.keys_on;
  const limit = (name, b) => (b ? `${name} ${count(b.remaining)} of ${count(b.limit)}` : null);
  fill(
    document.querySelector('#usage-table tbody'),
    Object.entries(usage.keys)
      .sort(([, a], [, b]) => b.total.all.input_tokens + b.total.all.output_tokens - (a.total.all.input_tokens + a.total.all.output_tokens))
      .map(([name, k]) =>
        el(
          'tr',
          { 'data-key': name },
          el('td', {}, el('strong', {}, name)),
          el('td', { class: 'num' }, count(k.today.all.requests)),
          el('td', { class: 'num' }, count(k.today.all.input_tokens)),
          el('td', { class: 'num' }, count(k.today.all.output_tokens)),
          el('td', { class: 'num' }, count(k.today.all.estimated_tokens)),
          el('td', { class: 'num' }, count(k.total.all.input_tokens + k.total.all.output_tokens)),
          el('td', { class: 'num' }, k.in_flight),
          el(
            'td',
            {},
            [limit('minute', k.budget.tokens_per_minute), limit('day', k.budget.tokens_per_day), limit('month', k.budget.tokens_per_month)]
              .filter(Boolean)
              .join(' · ') || '—',
          ),
        ),
      ),
    8,
  );
}

// --- the loop -----------------------------------------------------------------------------------

async function tick() {
  try {
    const [status, endpoints, models, translators] = await Promise.all(Object.values(ROUTES).map(poll));
    record(status);
    renderOverview(status, endpoints, translators);
    renderEndpoints(endpoints);
    renderModels(models, endpoints);
    renderUsage(await poll(USAGE));
    document.getElementById('problem').hidden = true;
    document.getElementById('updated').textContent = `Updated ${new Date().toLocaleTimeString()} · every ${INTERVAL_S}s`;
  } catch (err) {
    const problem = document.getElementById('problem');
    problem.textContent = `Cannot reach the gateway's status routes: ${err.message}`;
    problem.hidden = false;
  }
  setTimeout(tick, INTERVAL_S * 1000);
}

function showTab() {
  const tab = (location.hash || '#overview').slice(1);
  for (const panel of document.querySelectorAll('[data-panel]')) panel.hidden = panel.id !== tab;
  for (const link of document.querySelectorAll('nav a')) link.classList.toggle('active', link.dataset.tab === tab);
  if (tab === 'overview') for (const chart of Object.values(charts)) chart.setSize({ width: Math.max(chart.root.parentElement.clientWidth, 300), height: 160 });
}

window.addEventListener('hashchange', showTab);
window.addEventListener('resize', showTab);
makeChart('chart-rate', 'req/s', '#3b6ee8');
makeChart('chart-latency', 'ms', '#8e59d9');
makeChart('chart-errors', '%', '#d64545');
showTab();
tick();
