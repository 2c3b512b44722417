"""A minimal v3 wire-protocol client for tests that must send exact (or broken) bytes.

    w = Wire(port)                       # TCP to 127.0.0.1:port
    w.startup(user="postgres", database="db", extra={"application_name": "x"})
    msgs = w.read_until("Z")             # [(type, body), ...]
    w.send(b"Q", b"select 1\\0"); w.read_until("Z")
    error_fields(body)                   # {"S": "FATAL", "C": "08P01", "M": "..."}
    w.raw(parse("", "select $1") + bind("", "", ["7"]) + execute() + sync())
    summary(w.read_until("Z"))           # [("1",), ("2",), ("D", ["7"]), ("C", "SELECT 1"), ...]
"""
import socket
import struct


def message(typ, body):
    """One protocol message: type byte, length, body."""
    return typ + struct.pack("!I", len(body) + 4) + body


def _cstr(text):
    return text.encode() + b"\0"


def parse(name, sql, oids=()):
    return message(b"P", _cstr(name) + _cstr(sql) + struct.pack("!H", len(oids)) +
                   b"".join(struct.pack("!I", o) for o in oids))


def bind(portal, stmt, params=(), result_formats=()):
    """Bind with text parameters (None: NULL)."""
    body = _cstr(portal) + _cstr(stmt) + struct.pack("!HH", 0, len(params))
    for v in params:
        if v is None:
            body += struct.pack("!i", -1)
        else:
            v = str(v).encode()
            body += struct.pack("!I", len(v)) + v
    body += struct.pack("!H", len(result_formats))
    body += b"".join(struct.pack("!H", f) for f in result_formats)
    return message(b"B", body)


def describe(kind, name=""):
    return message(b"D", kind.encode() + _cstr(name))


def execute(portal="", max_rows=0):
    return message(b"E", _cstr(portal) + struct.pack("!I", max_rows))


def close(kind, name=""):
    return message(b"C", kind.encode() + _cstr(name))


def sync():
    return message(b"S", b"")


def flush():
    return message(b"H", b"")


def summary(msgs):
    """Messages as comparable tuples: errors and notices by SQLSTATE, CommandComplete by tag,
    DataRow by its text values, ReadyForQuery by status, the rest by type alone."""
    out = []
    for typ, body in msgs:
        if typ in "EN":
            out.append((typ, error_fields(body).get("C")))
        elif typ == "C":
            out.append((typ, body.rstrip(b"\0").decode()))
        elif typ == "Z":
            out.append((typ, body.decode()))
        elif typ == "D":
            (n,), pos, vals = struct.unpack("!H", body[:2]), 2, []
            for _ in range(n):
                (ln,) = struct.unpack("!i", body[pos:pos + 4])
                pos += 4
                vals.append(None if ln < 0 else body[pos:pos + ln].decode())
                pos += max(ln, 0)
            out.append((typ, vals))
        elif typ != "S":        # (ParameterStatus)
            out.append((typ,))
    return out


def error_fields(body):
    out = {}
    for part in body.split(b"\0"):
        if part:
            out[chr(part[0])] = part[1:].decode(errors="replace")
    return out


class Wire:
    def __init__(self, port, host="127.0.0.1", timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def raw(self, data):
        self.sock.sendall(data)

    def send(self, typ, body):
        self.sock.sendall(typ + struct.pack("!I", len(body) + 4) + body)

    def startup(self, user="postgres", database="postgres", extra=None, version=196608):
        params = {"user": user, "database": database}
        params.update(extra or {})
        body = struct.pack("!I", version)
        for k, v in params.items():
            body += k.encode() + b"\0" + v.encode() + b"\0"
        body += b"\0"
        self.sock.sendall(struct.pack("!I", len(body) + 4) + body)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def read_byte(self):
        while not self.buf:
            self._fill()
        b, self.buf = self.buf[:1], self.buf[1:]
        return b

    def read_msg(self):
        while len(self.buf) < 5:
            self._fill()
        typ = chr(self.buf[0])
        (length,) = struct.unpack("!I", self.buf[1:5])
        while len(self.buf) < 1 + length:
            self._fill()
        body = self.buf[5:1 + length]
        self.buf = self.buf[1 + length:]
        return typ, body

    def read_until(self, typ="Z"):
        msgs = []
        while True:
            m = self.read_msg()
            msgs.append(m)
            if m[0] == typ:
                return msgs

    def read_all(self):
        """Every message until the server closes the connection."""
        msgs = []
        try:
            while True:
                msgs.append(self.read_msg())
        except (EOFError, ConnectionResetError, socket.timeout):
            return msgs

    def login(self, **kw):
        """Startup with trust auth; returns the messages up to ReadyForQuery."""
        self.startup(**kw)
        return self.read_until("Z")

    def query(self, sql):
        self.send(b"Q", sql.encode() + b"\0")
        return self.read_until("Z")


def errors_in(msgs):
    return [error_fields(body) for typ, body in msgs if typ == "E"]
