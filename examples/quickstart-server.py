#!/usr/bin/env python3
"""The quickstart's web server: one folder over HTTP on 127.0.0.1.

drsd pins every download to the version `drsctl add-url` saw, and checks each
answer against what it asked, so a server for it must give what S3 and nginx
give: a strong ETag (here the content's MD5, as S3 does for one-part uploads),
Last-Modified, Content-Length, byte ranges (206 with Content-Range) and
If-Match (412 when the object changed). `python3 -m http.server` gives no
ETag and ignores Range, and drsd rightly refuses an object it cannot pin.

    usage: quickstart-server.py FOLDER [PORT]    (prints the port, 0 = any free one)
"""

import email.utils
import hashlib
import http.server
import os
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.answer(with_body=False)

    def do_GET(self):
        self.answer(with_body=True)

    def answer(self, with_body):
        name = self.path.split("?", 1)[0].lstrip("/")
        path = os.path.join(self.server.root, name)
        # One level, no dot files: nothing outside the folder is served.
        if not name or "/" in name or name.startswith(".") or not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            data = f.read()
        etag = '"%s"' % hashlib.md5(data).hexdigest()
        wanted = self.headers.get("If-Match")
        if wanted is not None and wanted.strip() not in ("*", etag):
            self.send_error(412)
            return
        start, end, status = 0, len(data), 200
        asked = self.headers.get("Range")
        if asked is not None:
            span = parse_range(asked, len(data))
            if span is None:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            (start, end), status = span, 206
        self.send_response(status)
        self.send_header("ETag", etag)
        mtime = os.stat(path).st_mtime
        self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(data)))
        self.end_headers()
        if with_body:
            self.wfile.write(data[start:end])

    def log_message(self, *args):
        pass


def parse_range(header, size):
    """`bytes=A-B` or `bytes=A-` as [start, end), or None when unsatisfiable."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    try:
        start = int(first)
        end = int(last) + 1 if last else size
    except ValueError:
        return None
    if start >= size or end <= start:
        return None
    return start, min(end, size)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), Handler
    )
    server.root = sys.argv[1]
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
