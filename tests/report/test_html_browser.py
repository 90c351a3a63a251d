"""The HTML profile in a real headless browser (Chromium, driven over its DevTools pipe, no extra package):
the timeline draws, the wheel zooms, hovering an instruction shows its kernel source line.

Without Chromium the test skips and says so (`make test` installs it and then requires it). Set
TRNSIM_SCREENSHOT_DIR to keep the screenshot it takes."""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import time

import pytest
from click.testing import CliRunner

from trnsim.cli import cli

KERNEL = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scaled_matmul(a, b):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, 128), a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, 512), b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=y, src=b[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=x, moving=y)
    res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=res, op=nl.exp, data=acc)
    nisa.dma_copy(dst=out, src=res)
    return out
'''
MATMUL_LINE = KERNEL.splitlines().index("        nisa.nc_matmul(dst=acc, stationary=x, moving=y)") + 1


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe: commands on fd 3, replies on fd 4,
    each a JSON message ending in a NUL byte."""

    def __init__(self, exe: str, profile_dir: str):
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()

        def wire():  # in the child: our pipe ends become fds 3 and 4, kept across exec
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (cmd_r, res_w)]  # out of the way of 3 and 4
            for fd, target in zip(high, (3, 4)):
                os.dup2(fd, target)
                os.set_inheritable(target, True)
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             f"--user-data-dir={profile_dir}", "--window-size=1400,1000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, close_fds=False)  # Python's own fds are non-inheritable: only 3 and 4 pass
        os.close(cmd_r)
        os.close(res_w)
        self.buf, self.next_id, self.session = b"", 0, None

    def call(self, method: str, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.res_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str):
        target = self.call("Target.createTarget", url=url)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)

    def js(self, expr: str):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def mouse(self, kind: str, x: float, y: float, **extra):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.close(self.cmd_w)
        os.close(self.res_r)


@pytest.fixture
def page(tmp_path, require_tool):
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    (tmp_path / "kern.py").write_text(KERNEL)
    r = CliRunner().invoke(cli, ["profile", str(tmp_path / "kern.py"), "--arg", "a=bf16[512,128]",
                                 "--arg", "b=bf16[512,512]", "--out", str(tmp_path / "out"), "--json"])
    assert r.exit_code == 0, r.output
    html = json.loads(r.output)["html"]
    browser = DevTools(exe, str(tmp_path / "chrome"))
    try:
        browser.open("file://" + html)
        for _ in range(400):
            try:
                if browser.js("document.body && document.body.dataset.ready") == "1":
                    break
            except RuntimeError as e:  # the blank page's context goes as the file loads
                if "context" not in str(e):
                    raise
            time.sleep(0.05)
        else:
            pytest.fail("the profile page never finished drawing")
        yield browser
    finally:
        browser.close()


def test_timeline_renders_zooms_and_hover_shows_the_source_line(page, tmp_path):
    # drawn: one lane per engine, DMA folded into one lane, pixels on the canvas
    lanes = page.js("trnsimProfile.lanes()")
    assert lanes[:1] == ["TensorE"] and "DMA ▸" in lanes and not any(name.startswith("DMA q") for name in lanes)
    inked = page.js("""(() => {const c = document.getElementById('tl'), d = c.getContext('2d')
        .getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] && (d[i] !== d[i + 1] || d[i + 1] !== d[i + 2])) n++;
        return n;})()""")
    assert inked > 500  # coloured pixels: the spans
    page.js("document.getElementById('tl').scrollIntoView()")
    rect = page.js("(() => {const r = document.getElementById('tl').getBoundingClientRect(); "
                   "return [r.left, r.top, r.width];})()")
    v0, v1 = page.js("trnsimProfile.view()")
    assert v0 == 0 and v1 > 0
    before = page.js("document.getElementById('range').textContent")

    # the wheel over the timeline zooms in around the pointer: a narrower visible range
    page.mouse("mouseWheel", rect[0] + rect[2] * 0.6, rect[1] + 40, deltaX=0, deltaY=-400)
    z0, z1 = page.js("trnsimProfile.view()")
    assert z1 - z0 < 0.9 * (v1 - v0) and z0 > v0
    assert page.js("document.getElementById('range').textContent") != before
    page.js("document.getElementById('reset').click()")
    assert page.js("trnsimProfile.view()") == [v0, v1]

    # hovering the last matmul shows its op, engine and the kernel line that issued it
    last = page.js("(() => {let best = -1; for (let i = 0; i < trnsimProfile.spans; i++) "
                   "if (trnsimProfile.at(i).lane === 0) best = i; return best;})()")
    span = page.js(f"trnsimProfile.at({last})")
    x = rect[0] + page.js(f"trnsimProfile.x({span['start'] + span['duration'] / 2})")
    y = rect[1] + page.js(f"trnsimProfile.laneY({span['lane']})")
    page.mouse("mouseMoved", x, y)
    tip = page.js("document.getElementById('tip').style.display + '|' + document.getElementById('tip').innerText")
    shown, text = tip.split("|", 1)
    assert shown == "block", text
    assert "nc_matmul" in text and "TensorE" in text and f"kern.py:{MATMUL_LINE}" in text

    # the DMA lane expands into its queues
    dma = lanes.index("DMA ▸")
    page.mouse("mousePressed", rect[0] + 20, rect[1] + page.js(f"trnsimProfile.laneY({dma})"), button="left",
               clickCount=1)
    page.mouse("mouseReleased", rect[0] + 20, rect[1] + page.js(f"trnsimProfile.laneY({dma})"), button="left",
               clickCount=1)
    assert sum(name.strip().startswith("queue") for name in page.js("trnsimProfile.lanes()")) == 16

    # the instruction table filters
    page.js("const f = document.getElementById('filter'); f.value = 'activation'; "
            "f.dispatchEvent(new Event('input'))")
    assert page.js("document.getElementById('count').textContent").startswith("1 of ")

    shot = base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"])
    assert shot.startswith(b"\x89PNG")
    (tmp_path / "profile.png").write_bytes(shot)
    if os.environ.get("TRNSIM_SCREENSHOT_DIR"):
        shutil.copy(tmp_path / "profile.png", os.environ["TRNSIM_SCREENSHOT_DIR"])
