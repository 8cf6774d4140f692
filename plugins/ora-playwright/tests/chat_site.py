"""A chat web UI served on 127.0.0.1 that can be told what to do with the next message.

``site.mode``: ``answer`` (streams ``site.reply`` into a new assistant bubble while a stop
button shows), ``expire`` (an expired-session banner), ``ratelimit`` (a rate-limit banner),
``hang`` (the stop button stays, nothing arrives), ``empty`` (an empty bubble), ``errortext``
(the error printed inside the reply bubble, as real sites do), ``logout`` (the page turns into
a login wall mid-conversation). The chat page itself shows a login wall until the browser
holds the ``sid`` cookie that ``/login`` sets, so a persistent user-data dir is observable.
``/mimic/<profile>`` serves the same behaviour in the markup of a built-in selector profile
(chatgpt, claude, gemini).
"""

from __future__ import annotations

import json
import string
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOGIN_PAGE = """<!doctype html><html><body>
<form id="login" action="/login" method="get"><input name="user"><button>Log in</button></form>
</body></html>"""

CHAT_PAGE = """<!doctype html><html><head><title>Local chat</title>
<style>.hidden { display: none }</style></head><body>
<div id="thread"></div>
<div id="banner-area"></div>
<textarea id="prompt"></textarea>
<button id="send">Send</button>
<button id="stop" class="hidden">Stop generating</button>
<script>
const thread = document.getElementById('thread');
const stop = document.getElementById('stop');
function bubble(cls, text) {
  const d = document.createElement('div'); d.className = cls; d.innerText = text; thread.appendChild(d); return d;
}
function banner(id, cls, text) {
  const d = document.createElement('div'); d.id = id; d.className = cls; d.innerText = text;
  document.getElementById('banner-area').appendChild(d);
}
document.getElementById('send').onclick = async () => {
  const box = document.getElementById('prompt');
  const text = box.value; box.value = '';
  bubble('user', text);
  stop.classList.remove('hidden');
  const r = await fetch('/api/send', {method: 'POST', headers: {'content-type': 'application/json'},
                                       body: JSON.stringify({prompt: text})});
  const data = await r.json();
  if (data.event === 'expire') { stop.classList.add('hidden');
    banner('expired', 'modal', 'Your session has expired. Please log in again.'); return; }
  if (data.event === 'ratelimit') { stop.classList.add('hidden');
    banner('limit', 'rate-limit', "You've reached the message limit. Try again in 3 hours."); return; }
  if (data.event === 'logout') {
    document.body.innerHTML = '<form id="login"><input name="user"><button>Log in</button></form>'; return; }
  const b = bubble('assistant', '');
  const reply = data.reply;
  for (let i = 0; i < reply.length; i += 4) {
    await new Promise(res => setTimeout(res, 15));
    b.innerText = reply.slice(0, i + 4);
  }
  stop.classList.add('hidden');
};
</script></body></html>"""


# Pages with the markup each built-in selector profile expects (``/mimic/<profile>``), driven by
# the same server-side modes, so the chatgpt, claude and gemini profiles run against a page too.
MIMICS: dict[str, dict[str, Any]] = {
    "chatgpt": {
        "controls": '<textarea id="prompt-textarea"></textarea><button data-testid="send-button">Send</button>'
                    '<button data-testid="stop-button" class="hidden">Stop</button>',
        "input": "#prompt-textarea", "send": "button[data-testid='send-button']",
        "stop": "button[data-testid='stop-button']",
        "bubble_tag": "div", "bubble_attrs": {"data-message-author-role": "assistant"},
        "expired_html": '<div data-testid="session-expired-modal">Your session has expired.</div>',
        "ratelimit_html": "<div data-testid=\"rate-limit-banner\">You've reached the message limit.</div>",
        "login_html": '<button data-testid="login-button">Log in</button>',
    },
    "claude": {
        "controls": '<div contenteditable="true"></div><button aria-label="Send message">Send</button>'
                    '<div data-is-streaming="true" class="hidden">...</div>',
        "input": "div[contenteditable='true']", "send": "button[aria-label='Send message']",
        "stop": "[data-is-streaming='true']",
        "bubble_tag": "div", "bubble_attrs": {"class": "font-claude-message"},
        "expired_html": '<form data-testid="login-form"><input id="email"></form>',  # claude logs you out
        "ratelimit_html": "<div data-testid=\"rate-limit-banner\">You've reached your usage limit.</div>",
        "login_html": '<form data-testid="login-form"><input id="email"></form>',
    },
    "gemini": {
        "controls": '<rich-textarea><div class="ql-editor" contenteditable="true"></div></rich-textarea>'
                    '<button class="send-button">Send</button><button class="stop hidden">Stop</button>',
        "input": "rich-textarea .ql-editor", "send": "button.send-button", "stop": "button.stop",
        "bubble_tag": "message-content", "bubble_attrs": {},
        "expired_html": '<a href="https://accounts.google.com/ServiceLogin">Sign in</a>',
        "ratelimit_html": "<div data-test-id=\"quota-exceeded\">You've reached your limit.</div>",
        "login_html": '<a href="https://accounts.google.com/ServiceLogin">Sign in</a>',
    },
}

MIMIC_PAGE = string.Template("""<!doctype html><html><head><title>mimic</title>
<style>.hidden { display: none } message-content { display: block }</style></head><body>
<div id="thread"></div><div id="banner-area"></div>
$controls
<script>
const M = $spec;
const thread = document.getElementById('thread');
const stop = document.querySelector(M.stop);
const box = document.querySelector(M.input);
function bubble(text) {
  const d = document.createElement(M.bubble_tag);
  for (const [k, v] of Object.entries(M.bubble_attrs)) d.setAttribute(k, v);
  d.innerText = text; thread.appendChild(d); return d;
}
document.querySelector(M.send).onclick = async () => {
  const text = box.tagName === 'TEXTAREA' ? box.value : box.innerText;
  if (box.tagName === 'TEXTAREA') box.value = ''; else box.innerText = '';
  stop.classList.remove('hidden');
  const r = await fetch('/api/send', {method: 'POST', headers: {'content-type': 'application/json'},
                                       body: JSON.stringify({prompt: text})});
  const data = await r.json();
  const area = document.getElementById('banner-area');
  if (data.event === 'expire') { stop.classList.add('hidden'); area.innerHTML = M.expired_html; return; }
  if (data.event === 'ratelimit') { stop.classList.add('hidden'); area.innerHTML = M.ratelimit_html; return; }
  if (data.event === 'logout') { document.body.innerHTML = M.login_html; return; }
  const b = bubble('');
  for (let i = 0; i < data.reply.length; i += 4) {
    await new Promise(res => setTimeout(res, 15));
    b.innerText = data.reply.slice(0, i + 4);
  }
  stop.classList.add('hidden');
};
</script></body></html>""")


def mimic_page(profile: str, logged_in: bool) -> str:
    spec = MIMICS[profile]
    if not logged_in:
        return f"<!doctype html><html><body>{spec['login_html']}</body></html>"
    return MIMIC_PAGE.substitute(controls=spec["controls"], spec=json.dumps(spec))


class ChatSite:
    def __init__(self) -> None:
        self.mode = "answer"
        self.reply = "Paris is the capital of France."
        self.prompts: list[str] = []
        self.require_login = True
        handler = type("Handler", (_Handler,), {"site": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/chat"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ChatSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def mimic_url(self, profile: str) -> str:
        """The page with the markup of the built-in selector profile ``profile``."""
        return f"http://127.0.0.1:{self.port}/mimic/{profile}"

    def profile_toml(self, **over: Any) -> str:
        """The generic selector profile a user would write for this site."""
        fields: dict[str, Any] = {
            "name": "local-chat", "url": self.url, "input": "#prompt", "send": "#send", "reply": ".assistant",
            "busy": "#stop", "login_wall": ["#login"], "session_expired": ["#expired"],
            "rate_limited": [".rate-limit"], "error_banner": [".error-banner"], "stable_ms": 250,
            "ready_timeout_s": 5.0, "poll_ms": 50,
        }
        fields.update(over)
        lines = [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
        lines += ["", "[reply_error_text]", 'session_expired = ["(?i)^\\\\W*(error: )?your session has expired"]',
                  'unavailable = ["(?i)^\\\\W*something went wrong"]']
        return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    site: ChatSite

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: str, ctype: str = "text/html", headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            return

    def do_GET(self) -> None:
        if self.path.startswith("/login"):
            self._send(302, "", headers={"Location": "/chat", "Set-Cookie": "sid=valid; Path=/; Max-Age=86400"})
        elif self.path.startswith("/chat"):
            logged_in = "sid=valid" in (self.headers.get("cookie") or "")
            self._send(200, CHAT_PAGE if logged_in or not self.site.require_login else LOGIN_PAGE)
        elif self.path.startswith("/mimic/") and self.path.split("/")[2] in MIMICS:
            logged_in = "sid=valid" in (self.headers.get("cookie") or "") or not self.site.require_login
            self._send(200, mimic_page(self.path.split("/")[2], logged_in))
        else:
            self._send(404, "not found", "text/plain")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        self.site.prompts.append(body.get("prompt", ""))
        mode = self.site.mode
        if mode == "hang":
            time.sleep(30)
            return
        if mode in ("expire", "ratelimit", "logout"):
            self._send(200, json.dumps({"event": mode}), "application/json")
            return
        reply = {"empty": "", "errortext": "Error: your session has expired, please log in again."}.get(
            mode, self.site.reply)
        self._send(200, json.dumps({"reply": reply}), "application/json")
