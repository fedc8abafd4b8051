"""Notifications: telling the owner that proposals wait (docs/design.md section 11).

Layer: beside `placet.executor`, above `placet.sync`; imports the store, config, text,
display, errors and schema, never Textual, MCP or Starlette.

- `placet.notify.content`: a message's words, made by placet from the stored proposals
  (kind, target, size, agent, expiry); agent text inert and cut short; `detail =
  "minimal"` names no path.
- `placet.notify.channels`: ntfy, webhook (HMAC-signed JSON) and desktop.
- `placet.notify.sender`: the thread `placet serve` and `placet review` run, which groups
  the outbox's events into messages, and flushes them when the session ends.
- `placet.notify.worker`: one thread per channel, which claims and sends its deliveries.
"""
