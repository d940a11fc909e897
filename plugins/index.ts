// The built-in plugins, by name. The registry is a map: a pipeline's `use:` looks up here.
import type { Plugin } from '../engine/api.js';
import accessLog from './access-log.js';
import aliasResolve from './alias-resolve.js';
import allowlist from './allowlist.js';
import authenticate from './authenticate.js';
import cors from './cors.js';
import dashboardAccess from './dashboard-access.js';
import dashboardFiles from './dashboard-files.js';
import countTokens from './count-tokens.js';
import endpointsCheck from './endpoints-check.js';
import endpointsReport from './endpoints-report.js';
import forward from './forward.js';
import gatewayHeaders from './gateway-headers.js';
import healthReport from './health-report.js';
import interceptModels from './intercept-models.js';
import matchPrefix from './match-prefix.js';
import metrics from './metrics.js';
import metricsReport from './metrics-report.js';
import modelDetail from './model-detail.js';
import modelScope from './model-scope.js';
import modelStatsReport from './model-stats-report.js';
import modelsList from './models-list.js';
import modelsRefresh from './models-refresh.js';
import modelsReport from './models-report.js';
import msgapiModelDetail from './msgapi-model-detail.js';
import msgapiModels from './msgapi-models.js';
import msgapiParse from './msgapi-parse.js';
import openaiModels from './openai-models.js';
import processReport from './process-report.js';
import rateLimit from './rate-limit.js';
import readBody from './read-body.js';
import readyReport from './ready-report.js';
import rootIndex from './root-index.js';
import rewriteModel from './rewrite-model.js';
import selectEndpoint from './select-endpoint.js';
import statusReport from './status-report.js';
import translate from './translate.js';
import translatorStatsReport from './translator-stats-report.js';
import tokenLimit from './token-limit.js';
import trace from './trace.js';
import usage from './usage.js';
import usageReport from './usage-report.js';
import stats from './stats.js';
import upstreamHeaders from './upstream-headers.js';
import version from './version.js';

export const BUILTIN_PLUGINS: readonly Plugin[] = [
  accessLog,
  aliasResolve,
  allowlist,
  authenticate,
  cors,
  countTokens,
  dashboardAccess,
  dashboardFiles,
  endpointsCheck,
  endpointsReport,
  forward,
  gatewayHeaders,
  healthReport,
  interceptModels,
  matchPrefix,
  metrics,
  metricsReport,
  modelDetail,
  modelScope,
  modelStatsReport,
  modelsList,
  modelsRefresh,
  modelsReport,
  msgapiModelDetail,
  msgapiModels,
  msgapiParse,
  openaiModels,
  processReport,
  rateLimit,
  readBody,
  readyReport,
  rewriteModel,
  rootIndex,
  selectEndpoint,
  stats,
  statusReport,
  tokenLimit,
  trace,
  translate,
  translatorStatsReport,
  usage,
  usageReport,
  upstreamHeaders,
  version,
];
