# The gateway as a container: `docker build -t inference-gateway .` (docs/guide/running.md, "Run it in a container").
# Node 24, the LTS line ("Krypton"): Node 20 is past its end of life. For reproducible builds pin
# the base image by digest: node:24-slim@sha256:<digest>.

# Stage 1: install every dependency, compile the TypeScript sources, and pack the package as
# npm would publish it (package.json `files`: bin, dist, pipelines, profiles, schemas...).
FROM node:24-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# No sources yet: the prepare script (tsc) runs below, once they are copied.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
RUN npm run build \
 && mkdir /pkg \
 && npm pack --ignore-scripts --silent --pack-destination /tmp \
 && tar -xzf /tmp/inference-gateway-*.tgz -C /pkg --strip-components=1 \
 && cp package-lock.json /pkg/

# Stage 2: the packed files and the production dependencies only, run as the unprivileged
# `node` user of the base image. The files stay root-owned: the gateway only reads them.
FROM node:24-slim
ENV NODE_ENV=production \
    GW_CONFIG=/etc/gw/config.yaml
WORKDIR /app
COPY --from=build /pkg/ ./
# --ignore-scripts: `prepare` would run tsc, which is a dev dependency; dist/ is built already.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
# Binds 0.0.0.0 and lets the private IPv4 ranges see the dashboard (spec: the published image).
COPY config/container.yaml /etc/gw/config.yaml
USER node
EXPOSE 40114
# Ready and serving when /internal/health answers 200 (whatever the backends' state). No curl in
# the slim image: Node's fetch, with a timeout below Docker's.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.GW_SERVER_PORT || 40114) + '/internal/health', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.status === 200 || r.status === 429 ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/gw.js"]
# `docker run IMAGE validate` checks the configuration instead (GW_CONFIG applies to both).
CMD ["serve"]
