"""A minimal v3 wire-protocol client for tests that must send exact (or broken) bytes.

    w = Wire(port)                       # TCP to 127.0.0.1:port
    w.startup(user="postgres", database="db", extra={"application_name": "x"})
    msgs = w.read_until("Z")             # [(type, body), ...]
    w.send(b"Q", b"select 1\\0"); w.read_until("Z")
    error_fields(body)                   # {"S": "FATAL", "C": "08P01", "M": "..."}
    w.raw(parse("", "select $1") + bind("", "", ["7"]) + execute() + sync())
    summary(w.read_until("Z"))           # [("1",), ("2",), ("D", ["7"]), ("C", "SELECT 1"), ...]
    w.password_login("", user="u")       # any password, even the empty one libpq never sends
"""
import base64
import hashlib
import hmac
import os
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

    def password_login(self, password, **startup_kw):
        """Startup, then answer the password request with <password> as libpq would
        (cleartext, md5 or SCRAM-SHA-256 without channel binding), whatever it is: libpq
        refuses to send an empty one. Returns (method, server_first, messages up to
        ReadyForQuery or the end): method "password", "md5" or "scram", server_first the
        SCRAM server-first-message (None for the others)."""
        self.startup(**startup_kw)
        typ, body = self.read_msg()
        if typ != "R":
            return None, None, [(typ, body)] + self.read_all()
        (code,) = struct.unpack("!I", body[:4])
        if code == 3:
            self.send(b"p", _cstr(password))
            return "password", None, self._login_end()
        if code == 5:
            user = startup_kw.get("user", "postgres")
            inner = hashlib.md5((password + user).encode()).hexdigest().encode()
            self.send(b"p", _cstr("md5" + hashlib.md5(inner + body[4:8]).hexdigest()))
            return "md5", None, self._login_end()
        assert code == 10 and b"SCRAM-SHA-256\0" in body[4:], body
        return ("scram",) + self._scram(password)

    def _login_end(self):
        msgs = []
        try:
            while not msgs or msgs[-1][0] != "Z":
                msgs.append(self.read_msg())
        except (EOFError, ConnectionResetError, socket.timeout):
            pass
        return msgs

    def _scram(self, password):
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = f"n=,r={nonce}"
        data = ("n,," + first_bare).encode()
        self.send(b"p", _cstr("SCRAM-SHA-256") + struct.pack("!I", len(data)) + data)
        typ, body = self.read_msg()
        if typ != "R":
            return None, [(typ, body)] + self.read_all()
        server_first = body[4:].decode()
        attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(),
                                     base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        final_bare = f"c=biws,r={attrs['r']}"
        auth_msg = f"{first_bare},{server_first},{final_bare}".encode()
        sig = hmac.new(hashlib.sha256(client_key).digest(), auth_msg, hashlib.sha256).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
        self.send(b"p", f"{final_bare},p={proof}".encode())
        return server_first, self._login_end()


def errors_in(msgs):
    return [error_fields(body) for typ, body in msgs if typ == "E"]
