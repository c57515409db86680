#!/usr/bin/env python3
"""The dashboard of a real smallem-coordinator, checked from outside.

  dashboard_test.py browser   headless Chromium (Debian's chromium,
                              chromium-driver, python3-selenium): the login
                              wall, the experiment list, the report table
                              against `smallemctl report --format json`, the
                              figure, a running curve gaining points without
                              a reload, the run and workers pages; screenshots
                              into $SMALLEM_BUILD_DIR/dashboard-screenshots/.
  dashboard_test.py metrics   /metrics scraped and parsed (Prometheus text).
  dashboard_test.py access    the JSON endpoints with and without the token,
                              cancel and retry only with it.
  dashboard_test.py https     the dashboard over HTTPS with the coordinator's
                              certificate (made by the openssl command).
  dashboard_test.py export    `smallemctl export --tensorboard --csv` read
                              back: TFRecord framing, both CRCs, the scalars.
  dashboard_test.py slow      raw sockets: 200 connections sending their
                              request head a line a second and 16 waiting
                              long-polls beside authenticated requests; the
                              head deadline; the cap per address.

Exit 0 when every check holds, 1 with the failed check, 77 (skipped) only
when Chromium cannot start, saying why.
"""
import http.client
import json
import os
import re
import socket
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from tfrecord import decode_events  # noqa: E402

TOKEN = "dashboard-test-token-0123456789"


def check(condition, message):
    if not condition:
        raise AssertionError(message)


# ---- browser -----------------------------------------------------------------

def start_chromium(profile):
    """A headless Chromium driven by chromedriver, or None and why not."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        return None, f"python3-selenium is not installed ({e}); scripts/setup installs it"
    if not os.path.exists("/usr/bin/chromedriver"):
        return None, "/usr/bin/chromedriver is missing (Debian package chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1000"]:
        options.add_argument(flag)
    try:
        return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options), ""
    except Exception as e:  # noqa: BLE001 - any failure to start is a skip
        return None, f"Chromium cannot start here: {str(e).splitlines()[0] if str(e) else e!r}"


def screenshot(driver, name):
    out = os.path.join(harness.BUILD, "dashboard-screenshots")
    os.makedirs(out, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(900, min(int(height) + 40, 4000)))
    driver.save_screenshot(os.path.join(out, name))


def wait(driver, condition, what, seconds=60):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait
    # The page re-renders as data arrives: an element found by one poll may
    # be replaced before the condition reads it. That poll counts as "not
    # yet", not as a failure (it made this test flaky under load).
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.2,
                             ignored_exceptions=[StaleElementReferenceException]
                             ).until(lambda d: condition(d))
    except Exception as e:  # noqa: BLE001
        shown = driver.find_element("tag name", "body").text[:800]
        raise AssertionError(f"never saw {what} ({type(e).__name__}); the page shows:\n{shown}")


def css(driver, selector):
    return driver.find_elements("css selector", selector)


def compare_table(driver, table_id, rows, keys, verdict=True):
    """Every row of `rows` (the report JSON's) is a <tr> of #table_id whose
    cells carry the same values."""
    shown = css(driver, f"#{table_id} tr[data-variant]")
    check(len(shown) == len(rows),
          f"#{table_id} shows {len(shown)} rows; smallemctl report has {len(rows)}")
    for row in rows:
        tr = css(driver, f'#{table_id} tr[data-variant="{row["variant"]}"]')
        check(tr, f"#{table_id} has no row for {row['variant']}")
        cells = {td.get_attribute("data-key"): json.loads(td.get_attribute("data-value"))
                 for td in tr[0].find_elements("css selector", "td[data-key]")}
        for key in keys:
            want = [row.get("ci_low"), row.get("ci_high")] if key == "ci" else row.get(key)
            check(cells.get(key) == want,
                  f"{table_id} {row['variant']} {key}: page {cells.get(key)!r}, report {want!r}")
        if verdict:
            shown_verdict = tr[0].find_element("css selector", 'td[data-key="verdict"]').text
            check(shown_verdict == row["verdict"], f"{table_id} {row['variant']}: page says "
                  f"{shown_verdict!r}, report {row['verdict']!r}")


def browser_case(stack, directory):
    driver, why = start_chromium(os.path.join(directory, "chromium-profile"))
    if driver is None:
        print(f"SKIPPED: {why}")
        return harness.SKIP
    try:
        # Without the token: the login form, and no data.
        driver.get(stack.url)
        wait(driver, lambda d: d.current_url.endswith("/login") and css(d, "#token"),
             "the login form")
        check("finished" not in driver.page_source, "the login page shows an experiment")
        screenshot(driver, "login.png")
        driver.get(stack.url + "api/experiments")
        body = driver.find_element("tag name", "body").text
        check("client token" in body and "finished" not in body,
              f"/api/experiments without the token answered: {body[:300]}")
        driver.get(stack.url + "login")
        css(driver, "#token")[0].send_keys("not-the-token-at-all")
        css(driver, "#login button")[0].click()
        wait(driver, lambda d: "failed" in d.current_url, "the failed login")
        check(css(driver, "#failed")[0].is_displayed(), "a wrong token is not reported")

        # Logged in: the experiment list.
        css(driver, "#token")[0].send_keys(TOKEN)
        css(driver, "#login button")[0].click()
        wait(driver, lambda d: css(d, '#experiments tr[data-experiment="running"]'),
             "the experiment list")
        finished = css(driver, '#experiments tr[data-experiment="finished"]')
        check(finished, "the list misses the finished experiment")
        check("12 succeeded" in finished[0].text, f"finished row: {finished[0].text}")
        running = css(driver, '#experiments tr[data-experiment="running"]')[0]
        check("1 leased" in running.text, f"running row: {running.text}")
        screenshot(driver, "experiments.png")

        # One experiment: the report table equals smallemctl's, the figure is drawn.
        report = json.loads(stack.ctl("report", "finished", "--format", "json"))
        driver.get(stack.url + "#/experiments/finished")
        wait(driver, lambda d: css(d, "#report-steps tr[data-variant]"), "the report table")
        compare_table(driver, "report-steps", report["rows"],
                      ["seeds_finished", "mean_val_nats_per_byte", "delta", "ci", "tau",
                       "delta_over_tau", "params", "params_change"])
        # The parameter-difference flag is the CLI's: " !" exactly where the report warns.
        for row in report["rows"]:
            cell = css(driver, f'#report-steps tr[data-variant="{row["variant"]}"] '
                               'td[data-key="params_change"]')
            check(cell and cell[0].text.endswith(" !") == bool(row.get("params_warning")),
                  f"{row['variant']}: Δ params {cell[0].text if cell else 'missing'!r}, "
                  f"report warns {bool(row.get('params_warning'))}")
        check("equal_time" in report, "the fixture's report has no equal-time section")
        compare_table(driver, "report-time", report["equal_time"]["rows"],
                      ["mean_train_seconds", "mean_val_nats_per_byte", "reference_loss", "delta",
                       "delta_over_tau", "extrapolated"])
        check("noise" in report, "the fixture's report has no noise section")
        compare_table(driver, "report-noise", report["noise"]["rows"],
                      ["seeds", "spread", "stddev", "f_p", "welch_t", "seeds_to_resolve"],
                      verdict=False)
        panels = css(driver, "#figure svg g.panel")
        check(len(panels) == 2, f"the figure has {len(panels)} panels, not 2")
        check(css(driver, "#figure svg polyline.reference-line"), "no reference curve drawn")
        check(css(driver, "#figure svg polygon.reference-band"), "no reference band drawn")
        series = {g.get_attribute("data-series") for g in css(driver, "#figure svg g.series")}
        check({"variant:base", "variant:wide"} <= series, f"figure series: {sorted(series)}")
        # Drawn, not only present: the steps panel has each arm's training
        # curve (more than its final point) and the variant's Δ with its
        # interval; in each panel no two labels run into each other.
        figure = driver.execute_script(
            "const box = (e) => { const r = e.getBoundingClientRect();"
            " return [r.left, r.right, r.top, r.bottom]; };"
            "return {curves: [...document.querySelectorAll("
            "   '#steps-panel polyline.training-curve')].map("
            "   (p) => p.getAttribute('points').trim().split(/\\s+/).length),"
            " deltas: document.querySelectorAll('#steps-panel g.delta line.delta-interval').length,"
            " panels: [...document.querySelectorAll('#figure svg g.panel')].map("
            "   (g) => [...g.querySelectorAll('text.tick-label')].map(box))};")
        check(len(figure["curves"]) >= 2 and min(figure["curves"]) > 1,
              f"steps panel training curves (points each): {figure['curves']}")
        check(figure["deltas"] >= 1, "no Δ interval drawn at the budget")
        for labels in figure["panels"]:
            for i, a in enumerate(labels):
                for b in labels[i + 1:]:
                    overlap = a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]
                    check(not overlap, f"figure labels overlap: {a} and {b}")
        screenshot(driver, "experiment.png")

        # A running run's curve gains points without a reload.
        driver.get(stack.url + "#/experiments/running")
        selector = f'svg.live-curve[data-run="{stack.running_run}"]'
        # The attribute's text ("0" included) is truthy once the curve is drawn.
        before = int(wait(driver, lambda d: css(d, selector) and
                          css(d, selector)[0].get_attribute("data-points"),
                          "the running run's curve"))
        driver.execute_script("window.smallemTestMarker = 'same page'")
        step = stack.beat()
        wait(driver, lambda d: css(d, selector) and
             int(css(d, selector)[0].get_attribute("data-points")) > before,
             f"the curve gain the point of step {step}")
        check(driver.execute_script("return window.smallemTestMarker") == "same page",
              "the page reloaded to show the new point")
        check(css(driver, '.actions button[data-action$="/cancel"]'),
              "no cancel button for a logged-in user")
        screenshot(driver, "running.png")

        # The run's page: attempts, spec; the workers page.
        driver.get(stack.url + f"#/runs/{stack.running_run}")
        wait(driver, lambda d: css(d, "#attempts tr") and css(d, "#spec"), "the run page")
        check('"seed": 1' in css(driver, "#spec")[0].text, "the run's spec is not shown")
        # Its routing balance (the seeder's points report a mixture of experts).
        load = css(driver, "#expert-load")
        check(load and load[0].text.startswith("max/mean load 1.25×"),
              f"expert load: {load[0].text if load else 'not shown'}")
        # Its training curve fills the box it is in, with three or more round
        # ticks on each axis, none running into another, and the loss ticks
        # bracketing the curve.
        wait(driver, lambda d: css(d, ".curve.run polyline"), "the run page's training curve")
        box, chart = css(driver, ".curve.run")[0], css(driver, ".curve.run svg")[0]
        check(chart.size["width"] >= 0.9 * box.size["width"] - 16,
              f"the curve takes {chart.size['width']} px of its {box.size['width']} px box")
        boxes = driver.execute_script(
            "const box = (e) => { const r = e.getBoundingClientRect();"
            " return [r.left, r.right, r.top, r.bottom]; };"
            "return {x: [...document.querySelectorAll('.curve.run .x-tick')].map(box),"
            " y: [...document.querySelectorAll('.curve.run .y-tick')].map(box),"
            " line: box(document.querySelector('.curve.run polyline'))};")
        for axis in ("x", "y"):
            ticks = sorted(boxes[axis])
            check(len(ticks) >= 3, f"{len(ticks)} {axis} tick labels on the run's curve")
            for a, b in zip(ticks, ticks[1:]):
                apart = a[1] <= b[0] if axis == "x" else (a[3] <= b[2] or b[3] <= a[2])
                check(apart, f"{axis} tick labels overlap: {a} and {b}")
        tops = [t[2] for t in boxes["y"]]
        bottoms = [t[3] for t in boxes["y"]]
        check(min(tops) <= boxes["line"][2] and max(bottoms) >= boxes["line"][3],
              f"the loss ticks {boxes['y']} do not bracket the curve {boxes['line']}")
        screenshot(driver, "run.png")
        # A run that diverged on every attempt: its step, each attempt's stderr tail.
        driver.get(stack.url + f"#/runs/{stack.failed_run}")
        wait(driver, lambda d: css(d, "#diverged"), "the diverged run's page")
        check(css(driver, "#diverged")[0].text == "Diverged at step 40",
              f"diverged: {css(driver, '#diverged')[0].text}")
        rows = css(driver, "#attempts tr")[1:]
        check(len(rows) == stack.failed_attempts,
              f"{len(rows)} attempts shown, {stack.failed_attempts} made")
        check(all("training diverged" in r.text and "engine_error" in r.text for r in rows),
              "an attempt's outcome or stderr tail is missing")
        check(not css(driver, "#expert-load"), "a dense run's page shows an expert load")
        screenshot(driver, "run-failed.png")
        driver.get(stack.url + "#/workers")
        wait(driver, lambda d: css(d, "#workers tr td"), "the workers page")
        check("w1" in css(driver, "#workers")[0].text, "worker w1 is not listed")
        screenshot(driver, "workers.png")
    finally:
        driver.quit()
    return 0


# ---- metrics -----------------------------------------------------------------

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """{(name, frozenset(labels)): value}, checking every line's syntax and
    that every sample's family was declared with # TYPE."""
    types, samples = {}, {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            check(kind in ("counter", "gauge", "histogram", "summary"), f"line {n}: {line}")
            types[name] = kind
            continue
        m = SAMPLE.match(line)
        check(m, f"line {n} is not a sample: {line!r}")
        name, labels = m.group(1), frozenset(LABEL.findall(m.group(3) or ""))
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        check(name in types or family in types, f"line {n}: {name} has no # TYPE")
        samples[(name, labels)] = float(m.group(4))
    return samples


def metrics_case(stack, directory):
    status, _ = stack.get("metrics")
    check(status == 401, f"/metrics without the token answered {status}, not 401")
    status, text = stack.get("metrics", token=TOKEN)
    check(status == 200, f"/metrics with the token answered {status}")
    m = parse_prometheus(text)

    def value(name, **labels):
        key = (name, frozenset(labels.items()))
        check(key in m, f"/metrics has no {name}{labels}")
        return m[key]

    check(value("smallem_runs", status="succeeded") == 12, "succeeded runs ≠ 12")
    check(value("smallem_runs", status="leased") == 1, "leased runs ≠ 1")
    check(value("smallem_runs", status="failed") == 1, "failed runs ≠ 1")
    check(value("smallem_queue_depth") == 0, "queue depth ≠ 0")
    leases = 13 + stack.failed_attempts
    check(value("smallem_leases_granted_total") == leases, f"leases granted ≠ {leases}")
    check(value("smallem_leases_lost_total") == 0, "leases lost ≠ 0")
    check(value("smallem_workers_alive") == 1, "workers alive ≠ 1")
    check(value("smallem_devices_alive") == 1, "devices alive ≠ 1")
    complete = "/smallem.v1.WorkerService/Complete"
    check(value("smallem_rpc_requests_total", method=complete, code="OK") == 12,
          "Complete calls ≠ 12")
    count = value("smallem_rpc_duration_seconds_count", method=complete)
    check(count == 12, f"Complete latency count {count} ≠ 12")
    buckets = sorted((float("inf") if dict(k[1])["le"] == "+Inf" else float(dict(k[1])["le"]), v)
                     for k, v in m.items()
                     if k[0] == "smallem_rpc_duration_seconds_bucket"
                     and dict(k[1])["method"] == complete)
    check(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "buckets not cumulative")
    check(buckets[-1] == (float("inf"), count), "the +Inf bucket is not the count")
    check(value("smallem_store_commit_seconds_count") > 0, "no store commit counted")
    check(value("smallem_store_commit_seconds_sum") > 0, "store commits took no time")
    data = os.path.join(directory, "data")
    size = sum(os.path.getsize(os.path.join(data, f)) for f in os.listdir(data))
    check(value("smallem_dataset_bytes") == size, f"dataset bytes ≠ {size}")
    check(value("smallem_datasets") == 1, "datasets ≠ 1")
    # A beat moves the counters.
    stack.beat()
    _, text = stack.get("metrics", token=TOKEN)
    beats = parse_prometheus(text)[("smallem_rpc_requests_total",
                                    frozenset({"method": "/smallem.v1.WorkerService/Heartbeat",
                                               "code": "OK"}.items()))]
    want = 6 + stack.failed_attempts
    check(beats == want, f"heartbeats counted {beats}, not {want}")
    return 0


# ---- access ------------------------------------------------------------------

def access_case(stack, directory):
    for path in ["api/experiments", "api/experiments/finished", f"api/runs/{stack.running_run}",
                 "api/workers", "api/changes", "metrics"]:
        status, body = stack.get(path)
        check(status == 401, f"{path} without the token answered {status}: {body[:200]}")
        check("finished" not in body, f"{path} without the token shows data")
        status, body = stack.get(path, token=TOKEN)
        check(status == 200, f"{path} with the token answered {status}: {body[:200]}")
    status, _ = stack.get("api/experiments", token="wrong-token-of-enough-length")
    check(status == 401, f"a wrong token got {status}")
    status, body = stack.get("", method="GET")
    check(status == 200 and "Log in" in body, "/ without the token does not lead to the login form")
    status, body = stack.get("api/session", token=TOKEN)
    check(json.loads(body) == {"token_required": True, "can_act": True}, f"session: {body}")
    # Actions: refused without the token or without the script's header.
    path = f"api/runs/{stack.running_run}/cancel"
    status, _ = stack.get(path, method="POST", headers={"X-Smallem-Action": "1"})
    check(status == 401, f"cancel without the token answered {status}")
    status, _ = stack.get(path, token=TOKEN, method="POST")
    check(status == 401, f"cancel without X-Smallem-Action answered {status}")
    status, body = stack.get(path, token=TOKEN, method="POST", headers={"X-Smallem-Action": "1"})
    check(status == 200 and json.loads(body) == {"changed": 1}, f"cancel: {status} {body}")
    run = json.loads(stack.get(f"api/runs/{stack.running_run}", token=TOKEN)[1])["run"]
    check(run["status"] == "cancelled", f"the cancelled run is {run['status']}")
    status, body = stack.get(f"api/runs/{stack.running_run}/retry", token=TOKEN, method="POST",
                             headers={"X-Smallem-Action": "1"})
    check(status == 200 and json.loads(body) == {"changed": 1}, f"retry: {status} {body}")
    status, body = stack.get("api/experiments/no-such-experiment", token=TOKEN)
    check(status == 404 and "no-such-experiment" in body, f"unknown experiment: {status} {body}")
    status, body = stack.get(f"api/runs/{stack.running_run}?after_step=x", token=TOKEN)
    check(status == 400, f"a bad after_step answered {status}")
    status, body = stack.get("api/runs/99999999999999999999999", token=TOKEN)
    check(status == 404 and "no run 99999999999999999999999" in body and "after_step" not in body,
          f"a run id past int64 answered {status} {body}")
    # Login and logout change the session: refused to a form on another site
    # and to a bare request that says nothing of where it comes from. Logout
    # carries the token (a browser's session cookie; without either it is
    # 401, as every guarded path).
    host = urllib.parse.urlsplit(stack.url).netloc
    form = urllib.parse.urlencode({"token": TOKEN})
    session = {"Authorization": f"Bearer {TOKEN}"}
    for path, body, base in [("/login", form, {}), ("/logout", "", session)]:
        for headers in [{}, {"Origin": "https://evil.example"},
                        {"Sec-Fetch-Site": "cross-site"}]:
            status, cookie, text = raw_post(host, path, body, {**base, **headers})
            check(status == 403 and cookie is None,
                  f"POST {path} with {headers or 'no Origin'} answered {status}, cookie {cookie}")
            check("X-Smallem-Action" in text, f"POST {path} refused with: {text}")
        for headers in [{"Origin": f"http://{host}"}, {"X-Smallem-Action": "1"}]:
            status, cookie, _ = raw_post(host, path, body, {**base, **headers})
            check(status == 303 and cookie, f"POST {path} with {headers} answered {status}")
    return 0


def raw_post(host, path, body, headers):
    """(status, Set-Cookie or None, body) of a form POST sent as written, no redirect followed."""
    connection = http.client.HTTPConnection(host, timeout=60)
    try:
        connection.request("POST", path, body=body,
                           headers={"Content-Type": "application/x-www-form-urlencoded",
                                    **headers})
        response = connection.getresponse()
        return response.status, response.getheader("Set-Cookie"), response.read().decode()
    finally:
        connection.close()


def slow_case(stack, _):
    """200 connections that send a request head a line a second (from ten
    addresses), and 16 tabs waiting on /api/changes, leave an authenticated
    request its answer; the slow ones are closed at the head deadline; one
    address gets at most 32 connections."""
    where = urllib.parse.urlsplit(stack.url)

    def connect(source):
        return socket.create_connection((where.hostname, where.port), timeout=60,
                                        source_address=(source, 0))

    slow = []
    for i in range(200):
        s = connect(f"127.0.0.{2 + i % 10}")
        s.sendall(b"GET /api/workers HTTP/1.1\r\nHost: slow\r\n")
        slow.append(s)
    stop = threading.Event()

    def drip():
        # A header line a second: never a whole head, never a read timeout.
        while not stop.wait(1):
            for s in slow:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass

    threading.Thread(target=drip, daemon=True).start()
    try:
        status, body = guarded_get(stack, "api/workers")
        check(status == 200, f"/api/workers beside 200 slow connections answered {status}: {body}")
        since = json.loads(guarded_get(stack, "api/changes")[1])["changes"]
        answered = []
        tabs = [threading.Thread(target=lambda: answered.append(
                    guarded_get(stack, f"api/changes?since={since}")[0]), daemon=True)
                for _ in range(16)]
        for tab in tabs:
            tab.start()
        for _ in range(3):
            status, body = guarded_get(stack, "api/experiments")
            check(status == 200, f"/api/experiments beside 16 long-polls answered {status}: {body}")
        for tab in tabs:
            tab.join()
        check(answered == [200] * 16, f"the long-polls answered {answered}")
        # The slow heads are cut off at the deadline: the server closes them
        # without an answer (here within the socket's 60 s).
        for s in slow[:3]:
            try:
                got = s.recv(4096)
            except ConnectionResetError:
                got = b""
            except OSError as e:
                raise AssertionError(f"a slow head was not closed by the server: {e}")
            check(got == b"", f"a slow head was answered: {got[:100]}")
    finally:
        stop.set()
        for s in slow:
            s.close()
    # Per address: 32 open connections, then the next is closed unanswered
    # even with a whole request; once they close, the address is served.
    held = [connect("127.0.0.20") for _ in range(32)]
    for s in held:
        s.sendall(b"GET /api/workers HTTP/1.1\r\n")
    request = (f"GET /api/workers HTTP/1.1\r\nHost: {where.netloc}\r\n"
               f"Authorization: Bearer {TOKEN}\r\n\r\n").encode()
    extra = connect("127.0.0.20")
    try:
        extra.sendall(request)
        got = extra.recv(4096)
    except (ConnectionResetError, BrokenPipeError):
        got = b""
    extra.close()
    check(got == b"", f"the 33rd connection of one address was answered: {got[:100]}")
    for s in held:
        s.close()
    for _ in range(100):  # the server learns of the closes on its own time
        again = connect("127.0.0.20")
        try:
            again.sendall(request)
            got = again.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            got = b""
        again.close()
        if got:
            break
        time.sleep(0.05)
    check(got.startswith(b"HTTP/1.1 200"), f"the address was not served again: {got[:100]}")
    return 0


def guarded_get(stack, path):
    """stack.get with the token; a request that gets no answer is a failed check."""
    try:
        return stack.get(path, token=TOKEN)
    except OSError as e:  # urllib's timeout and connection errors
        raise AssertionError(f"GET /{path} got no answer: {e}")


def https_case(_, directory):
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    made = os.system(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        f"-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout {key} "
        f"-out {cert} >/dev/null 2>&1")
    check(made == 0, "the openssl command could not make a certificate")
    stack = harness.Stack(os.path.join(directory), TOKEN, tls=(cert, key))
    try:
        check(stack.url.startswith("https://127.0.0.1:"), f"the dashboard is at {stack.url}")
        status, body = stack.get("api/experiments", token=TOKEN)
        check(status == 200 and json.loads(body)["experiments"] == [], f"{status} {body}")
        status, _ = stack.get("api/experiments")
        check(status == 401, f"without the token over HTTPS: {status}")
    finally:
        stack.close()
    return 0


# ---- export ------------------------------------------------------------------

def export_case(stack, directory):
    import csv
    import struct
    tb, csv_path = os.path.join(directory, "tb"), os.path.join(directory, "finished.csv")
    out = stack.ctl("export", "finished", "--tensorboard", tb, "--csv", csv_path)
    check("12 runs" in out, f"export said: {out}")
    experiment = json.loads(stack.get("api/experiments/finished", token=TOKEN)[1])
    runs = {r["id"]: json.loads(stack.get(f"api/runs/{r['id']}", token=TOKEN)[1])
            for r in experiment["runs"]}
    dirs = sorted(os.path.relpath(root, tb) for root, _, files in os.walk(tb) if files)
    check(len(dirs) == 12, f"{len(dirs)} run directories, not 12: {dirs}")
    for run_id, data in runs.items():
        run = data["run"]
        name = run["variant"] if run["variant_kind"] == "variant" else \
            "reference_" + re.sub(r"[^A-Za-z0-9._-]", "-", run["budget"])
        run_dir = os.path.join(tb, name, f"seed{run['seed']}")
        files = os.listdir(run_dir)
        check(len(files) == 1 and ".tfevents." in files[0], f"{run_dir}: {files}")
        scalars, texts = decode_events(os.path.join(run_dir, files[0]))
        points = data["points"]
        want = [(p["step"], struct.unpack("<f", struct.pack("<f", p["loss"]))[0]) for p in points]
        check(scalars.get("train/loss") == want, f"{run_dir} train/loss {scalars.get('train/loss')} ≠ {want}")
        check(len(scalars.get("train/tokens_per_s", [])) == len(points), f"{run_dir}: tokens/s")
        lrs = [v for _, v in scalars.get("train/lr", [])]
        peak = data["spec"]["lr"]
        check(len(lrs) == len(points) and all(0 < v <= peak * 1.0001 for v in lrs),
              f"{run_dir}: train/lr {lrs} (peak {peak})")
        val = run["result"]["val_nats_per_byte"]
        got = scalars.get("val/nats_per_byte")
        check(got and abs(got[0][1] - val) < 1e-6 and got[0][0] == run["result"]["steps"],
              f"{run_dir}: val/nats_per_byte {got}, result {val}")
        check(f'"seed": {run["seed"]}' in texts.get("run_spec", ""), f"{run_dir}: no run spec text")
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    train = [r for r in rows if r["kind"] == "train"]
    check(len(train) == sum(len(d["points"]) for d in runs.values()),
          f"{len(train)} training rows for {sum(len(d['points']) for d in runs.values())} points")
    vals = {int(r["run_id"]): float(r["val_nats_per_byte"]) for r in rows if r["kind"] == "val"}
    check(vals == {i: d["run"]["result"]["val_nats_per_byte"] for i, d in runs.items()},
          "the CSV's val rows differ from the results")
    first = train[0]
    point = runs[int(first["run_id"])]["points"][0]
    check(float(first["train_loss"]) == point["loss"] and int(first["step"]) == point["step"],
          f"CSV row {first} ≠ point {point}")
    return 0


CASES = {"browser": browser_case, "metrics": metrics_case, "access": access_case,
         "https": https_case, "export": export_case, "slow": slow_case}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(f"usage: dashboard_test.py {'|'.join(CASES)}")
        return 2
    if not harness.BUILD:
        print("SMALLEM_BUILD_DIR is not set (run through ctest)")
        return 2
    with tempfile.TemporaryDirectory(prefix="smallem-dashboard-") as directory:
        stack = harness.Stack(directory, TOKEN) if sys.argv[1] != "https" else None
        try:
            code = CASES[sys.argv[1]](stack, directory)
        except AssertionError as e:
            print(f"FAILED: {e}")
            traceback.print_exc()
            code = 1
        finally:
            if stack:
                stack.close()
    if code == 0:
        print(f"{sys.argv[1]}: every check passed")
    return code


if __name__ == "__main__":
    sys.exit(main())
