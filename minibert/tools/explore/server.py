"""The explorer's page, served on the loopback interface, or written as one file.

    python -m minibert explore DIR [--port P] [--no-browser]     a local page, answering as you type
    python -m minibert explore DIR --out page.html               the same page with a few answers inside
    python -m minibert explore QA --out page.html --text "QUESTION [SEP] PASSAGE"
                                                                 a question-answering model's page, its example and yours

The server is Python's own (http.server.ThreadingHTTPServer): it serves the page and its JSON
answers, nothing else, to 127.0.0.1 only. A request whose Host header is not this server's
loopback address or localhost, with its port, is refused (403), so a web page elsewhere cannot reach it through
a name that resolves to 127.0.0.1 (DNS rebinding). A bad text is a message in the page; the
server keeps answering. A typed text comes as a POST (JSON {"text", "draw"}, and the token and
layer the inside-a-layer panel follows, "position" and "layer"), so that a long text or one of
many-byte characters is not cut by the length of an address; a GET with ?text= is answered too.
/api/inside answers that panel alone, for another token or layer of the same text and draw.
"""

from __future__ import annotations

import json
import threading
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ...operations.files import write_atomic
from .answers import explore, explore_inside
from .example import PAIR_SEPARATOR, prepare
from .questions import MAX_PASSAGE_TOKENS, ask, reading_limits
from .overview import all_sources, overview, source
from .session import Session

LOOPBACK = "127.0.0.1"
ANSWERS_MARK = "/*EXPLORE-ANSWERS*/null"  # where page.html takes the answers of a page without a server
STATIC_DRAWS = 3  # the run's own text, drawn (or its copies stepped through) this many times
MAX_BODY_BYTES = 1 << 20  # a POSTed text is read up to this size: the explorer reads at most 100,000 characters of it


SCRIPTS_MARK = "/*EXPLORE-SCRIPTS*/"  # where page.html takes its scripts, in this order: page.js, the core, last
SCRIPTS = ("strip.js", "guesses.js", "inside.js", "attention.js", "overview.js", "questions.js", "page.js")


def page_template() -> str:
    """page.html with its scripts inside: one file, served or written, that loads nothing else."""
    files = resources.files(__package__)
    scripts = "\n".join(files.joinpath(name).read_text(encoding="utf-8") for name in SCRIPTS)
    return files.joinpath("page.html").read_text(encoding="utf-8").replace(SCRIPTS_MARK, scripts)


def embedded(answers: dict) -> str:
    """JSON that is safe inside a <script> element; "://" is written with an escaped colon, so that
    the file names no address (JSON.parse reads it back unchanged)."""
    text = json.dumps(answers, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("://", "\\u003a//")


def write_page(session: Session, out: str | Path, texts: list[str] = ()) -> Path:
    """One self-contained HTML file: the page with the answers for the run's own text (a few
    draws) and for `texts`, the list of the texts it holds, the model and run panels, and the
    source the panels name."""
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; give the file to write, e.g. {out / 'explore.html'}")
    if session.reading is not None:
        return write_answers_page(session, out, texts)
    examples = [example(session, None, d) for d in range(STATIC_DRAWS)] if session.data is not None else []
    examples += [example(session, t, 0) for t in texts]
    if not examples:
        raise ValueError(f"{session.directory} has no run corpus to show: pass a text (--text \"...\") for the page")
    answers = {"overview": overview(session), "examples": examples, "texts": texts_held(examples), "sources": all_sources()}
    write_atomic(out, page_template().replace(ANSWERS_MARK, embedded(answers)))
    return out


def example(session: Session, text: str | None, draw: int) -> dict:
    """One text and draw as a written page holds it: the answer, and the inside of every layer at
    the token its inside-a-layer panel follows (the page switches layers; another token needs the server)."""
    answer = explore(session, text, draw)
    position = answer["inside"]["position"]
    layers = [answer["inside"]] + [explore_inside(session, text, draw, position, layer)
                                   for layer in range(1, answer["inside"]["layers"])]
    return {"text": text, "draw": draw, "answer": answer, "layers": layers}


def texts_held(examples: list[dict]) -> list[dict]:
    """Which texts a written page holds (None: the run's own), each once, with how many draws."""
    held: dict = {}
    for example in examples:
        held[example["text"]] = held.get(example["text"], 0) + 1
    return [{"text": text, "draws": draws} for text, draws in held.items()]


def write_answers_page(session: Session, out: Path, texts: list[str]) -> Path:
    """A question-answering model's page as one file: its example's answer and, for each of
    `texts` ("QUESTION [SEP] PASSAGE", the pair as the model reads it), that question's."""
    pairs = [session.example]
    for text in texts:
        if PAIR_SEPARATOR not in text:
            raise ValueError(f"--text {text[:40]!r}: a question-answering model takes \"QUESTION {PAIR_SEPARATOR} PASSAGE\"")
        question, passage = (part.strip() for part in text.split(PAIR_SEPARATOR, 1))
        pairs.append((question, passage))
    examples = [{"question": q, "passage": p, "answer": ask(session, q, p)} for q, p in pairs]
    answers = {"overview": overview(session), "examples": examples, "sources": all_sources()}
    write_atomic(out, page_template().replace(ANSWERS_MARK, embedded(answers)))
    return out


class Handler(BaseHTTPRequestHandler):
    """GET /, /api/overview, /api/explore?text=&draw=, /api/inside?text=&draw=&position=&layer=,
    /api/answer?question=&passage= (a question-answering model), /api/source?name=, and POST
    /api/explore or /api/inside with a JSON body {"text", "draw", "position", "layer"}; nothing
    else (a browser's /favicon.ico gets an empty answer, so that its console shows no error)."""

    session: Session  # set on the subclass `serve` makes

    def foreign(self) -> bool:
        """Refuse (403) a request addressed to another host: see the module's docstring."""
        port = self.server.server_address[1]
        if self.headers.get("Host") in (f"{LOOPBACK}:{port}", f"localhost:{port}"):
            return False
        self.reply(HTTPStatus.FORBIDDEN, {"error": f"this server answers only http requests for {LOOPBACK}:{port} or localhost:{port}"})
        return True

    def do_POST(self) -> None:
        """A typed text: JSON {"text": ..., "draw": n}. Only application/json, which a page
        elsewhere cannot send here without the browser asking this server first."""
        if self.foreign():
            return
        path = urlsplit(self.path).path
        if path not in ("/api/explore", "/api/inside"):
            return self.reply(HTTPStatus.NOT_FOUND, {"error": f"nothing to POST to at {path}"})
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            return self.reply(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send the text as JSON: {\"text\": ..., \"draw\": 0}"})
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            return self.reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                              {"error": f"the text is {length:,} bytes; the explorer takes at most {MAX_BODY_BYTES:,}: shorten it"})
        try:
            asked = json.loads(self.rfile.read(length).decode("utf-8"))
            if not isinstance(asked, dict) or not isinstance(asked.get("text", ""), (str, type(None))):
                raise ValueError("send the text as JSON: {\"text\": ..., \"draw\": 0}")
            answer = answer_to(self.session, path, asked)
        except (ValueError, UnicodeDecodeError) as error:
            return self.reply(HTTPStatus.BAD_REQUEST, {"error": message(error)})
        return self.reply(HTTPStatus.OK, answer)

    def do_GET(self) -> None:
        if self.foreign():
            return
        url = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        try:
            if url.path == "/":
                return self.reply(HTTPStatus.OK, page_template().replace(ANSWERS_MARK, "null"), "text/html; charset=utf-8")
            if url.path == "/favicon.ico":
                return self.reply(HTTPStatus.NO_CONTENT, "", "image/x-icon")
            if url.path == "/api/overview":
                return self.reply(HTTPStatus.OK, overview(self.session))
            if url.path == "/api/source":
                return self.reply(HTTPStatus.OK, source(query.get("name", "")))
            if url.path == "/api/answer":
                return self.reply(HTTPStatus.OK, ask(self.session, query.get("question"), query.get("passage")))
            if url.path in ("/api/explore", "/api/inside"):
                return self.reply(HTTPStatus.OK, answer_to(self.session, url.path, query))
        except (ValueError, KeyError) as error:
            return self.reply(HTTPStatus.BAD_REQUEST, {"error": message(error)})
        return self.reply(HTTPStatus.NOT_FOUND, {"error": f"nothing at {url.path}"})

    def reply(self, status: HTTPStatus, body, content_type: str = "application/json") -> None:
        data = (body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        """Quiet: the terminal keeps the one line that says where the page is."""


def message(error: Exception) -> str:
    """An error as one line for the page: its own words (str of a KeyError would add quotes around them)."""
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def answer_to(session: Session, path: str, asked: dict) -> dict:
    """/api/explore's or /api/inside's answer to what was asked, from a JSON body or a query string."""
    text, draw = asked.get("text"), whole_number(asked.get("draw", 0), "draw")
    if path == "/api/inside":
        return explore_inside(session, text, draw, whole_number(asked.get("position"), "position"),
                              whole_number(asked.get("layer", 0), "layer"))
    position = asked.get("position")
    return explore(session, text, draw, None if position is None else whole_number(position, "position"),
                   whole_number(asked.get("layer", 0), "layer"))


def whole_number(value, name: str) -> int:
    """A whole number from JSON (an int) or a query string (its digits)."""
    if isinstance(value, str) and value.isdigit() and len(value) <= 9:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**9:
        return value
    raise ValueError(f"{name} must be a whole number from 0, got {value!r}")


def make_server(session: Session, port: int = 0) -> ThreadingHTTPServer:
    """A server for `session` on the loopback interface (port 0: a free one), not yet serving."""
    handler = type("ExploreHandler", (Handler,), {"session": session})
    try:
        server = ThreadingHTTPServer((LOOPBACK, port), handler)
    except OSError as error:
        raise ValueError(f"cannot listen on {LOOPBACK}:{port} ({error.strerror}); pick another --port or leave it out") from None
    server.daemon_threads = True
    return server


def serve(session: Session, port: int = 0, open_browser: bool = True) -> None:
    """Serve the page until Ctrl-C (KeyboardInterrupt, which the command turns into one line)."""
    server = make_server(session, port)
    try:
        url = f"http://{LOOPBACK}:{server.server_address[1]}/"
        limit = (f"questions up to {reading_limits(session)['max_query_len']} tokens, passages up to {MAX_PASSAGE_TOKENS:,}"
                 if session.reading is not None else f"texts of up to {session.encoder.max_length} tokens, a longer one cut")
        print(f"exploring {session.directory} at {url} ({limit}; Ctrl-C stops)", flush=True)
        threading.Thread(target=prepare, args=(session,), daemon=True).start()  # ready for Draw again on a static run
        if open_browser:
            webbrowser.open(url)
        server.serve_forever()
    finally:
        server.server_close()
