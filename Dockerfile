# One image for all four services; the command picks the service, e.g.
#   docker run toolgate node services/executor/dist/main.js
FROM node:20-slim AS build
WORKDIR /app
RUN npm install -g pnpm@12.4.2
COPY . .
RUN pnpm install --frozen-lockfile && pnpm build

FROM node:20-slim
WORKDIR /app
ENV NODE_ENV=production
RUN npm install -g pnpm@12.4.2
# Manifests first: production dependencies only, from the same lockfile.
COPY --from=build /app/package.json /app/pnpm-lock.yaml /app/pnpm-workspace.yaml ./
# Patches the lockfile applies to dependencies (see patches/README.md).
COPY --from=build /app/patches ./patches
COPY --from=build /app/packages ./packages
COPY --from=build /app/services ./services
COPY --from=build /app/test/package.json ./test/package.json
# Test-only packages (the bench and chaos tool sets, the test kit, the benchmark tools) are not in the image:
# no production package depends on them, and an executor asked for a test tool set refuses to start.
RUN rm -rf packages/*/node_modules services/*/node_modules && pnpm install --frozen-lockfile --prod \
  && rm -rf packages/*/src services/*/src packages/test-toolsets packages/testkit packages/devtools
USER node
CMD ["node", "services/orchestrator/dist/main.js"]
