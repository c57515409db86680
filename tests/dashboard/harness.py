"""A real smallem-coordinator with its dashboard, filled by smallem_dashboard_seed.

Stack(directory, token) starts `smallem-coordinator --http 127.0.0.1:0` on a
fresh database (with the client and worker token when given), runs the seeder
(a finished experiment with a reference curve, and a running one) and keeps
the seeder open so that beat() can send the running run one more point.
"""
import os
import subprocess
import threading
import urllib.error
import urllib.request

BUILD = os.environ.get("SMALLEM_BUILD_DIR", "")
SKIP = 77  # ctest SKIP_RETURN_CODE


def binary(*parts):
    return os.path.join(BUILD, *parts)


def read_until(process, marker, what):
    """Lines of `process`'s stdout until one contains `marker`; that line."""
    seen = []
    for line in process.stdout:
        seen.append(line.rstrip())
        if marker in line:
            return line.rstrip()
    raise RuntimeError(f"{what} exited before saying '{marker}'; it said:\n" + "\n".join(seen[-20:]))


class Stack:
    def __init__(self, directory, token="", tls=None):
        """tls: (certificate file, key file) to serve both ports with; the
        seeder speaks plaintext gRPC only, so a TLS stack is left empty."""
        self.dir = directory
        self.token = token
        self.ssl_context = None
        args = [binary("server", "smallem-coordinator"), "--listen", "127.0.0.1:0",
                "--db", os.path.join(directory, "smallem.db"), "--http", "127.0.0.1:0",
                "--lease-ms", "3600000", "--log-level", "info"]
        self.token_file = ""
        if token:
            self.token_file = os.path.join(directory, "token")
            with open(self.token_file, "w") as f:
                f.write(token + "\n")
            args += ["--client-token-file", self.token_file, "--worker-token-file", self.token_file]
        if tls:
            import ssl
            args += ["--tls-cert", tls[0], "--tls-key", tls[1]]
            self.ssl_context = ssl.create_default_context(cafile=tls[0])
        self.coordinator = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True)
        line = read_until(self.coordinator, "listening on ", "smallem-coordinator")
        self.address = line.split("listening on ")[1].split(" ")[0]
        line = read_until(self.coordinator, "dashboard at ", "smallem-coordinator")
        self.url = line.split("dashboard at ")[1].split(" ")[0]
        # Keep reading its log, so that a full pipe never blocks it.
        threading.Thread(target=lambda: [None for _ in self.coordinator.stdout],
                         daemon=True).start()
        self.seeder = None
        if tls:
            return
        seed_args = [binary("tests", "smallem_dashboard_seed"), "--coordinator", self.address,
                     "--dir", directory]
        if token:
            seed_args += ["--token", token]
        self.seeder = subprocess.Popen(seed_args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True)
        line = read_until(self.seeder, "seeded", "smallem_dashboard_seed")
        said = dict(word.split("=") for word in line.split() if "=" in word)
        self.running_run = int(said["run"])
        self.failed_run = int(said["failed"])
        self.failed_attempts = int(said["attempts"])

    def beat(self):
        """Sends the running run one more progress point; returns its step."""
        self.seeder.stdin.write("beat\n")
        self.seeder.stdin.flush()
        return int(read_until(self.seeder, "beat", "smallem_dashboard_seed").split()[1])

    def get(self, path, token=None, method="GET", headers=None):
        """(status, body text) of METHOD url/path, with `token` as a bearer token."""
        request = urllib.request.Request(self.url + path.lstrip("/"), method=method,
                                         headers=headers or {})
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=60, context=self.ssl_context) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def ctl(self, *args):
        """smallemctl ARGS --coordinator ADDRESS [--token-file]: its stdout (must succeed)."""
        cmd = [binary("cli", "smallemctl"), *args, "--coordinator", self.address]
        if self.token_file:
            cmd += ["--token-file", self.token_file]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def close(self):
        for p in (self.seeder, self.coordinator):
            if p is not None and p.poll() is None:
                if p.stdin:
                    p.stdin.close()
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
