"""The gateway service: REST + SSE over the event log, and the projections of it.

app.create_app(settings, *, redis=None, project=True) builds the Starlette app;
main.run serves it (`chat-agent gateway`); replay.run is `chat-agent replay`.
Modules, one concept each: routes_chat, routes_sessions, routes_health, openapi
(HTTP); access (who may see what), errors (one error shape), ratelimit; views (the
fold of events into views), projector (the consumer group and inline applies); sse
(the per-process log reader and the job stream).
"""
