"""How big each piece of a photo is, in Chromium: static/capture-send.js's own sizing rule and
signal meter, fed pieces timed on a simulated link (a clock the test moves), so the figures
are exact whatever the machine's load."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SCRIPT = Path(__file__).resolve().parents[1] / "static" / "capture-send.js"

# Sends `photos` photos of `photo` bytes over a link of `rate` bytes a second whose every
# request waits `rtt` seconds beyond its bytes, sizing each piece as the phone does; the
# clock moves by what each piece takes. Returns each piece's size and the share of the time
# the link carried bytes.
SIMULATE = """
([rate, rtt, photos, photo]) => {
  const meter = CaptureSend.Meter(), sizes = [];
  let clock = 0, busy = 0;
  for (let p = 0; p < photos; p += 1) {
    for (let offset = 0; offset < photo;) {
      const size = CaptureSend.pieceSize(photo - offset, meter.signal);
      const started = clock;
      clock += size / rate + rtt;
      busy += size / rate;
      meter.learn(size, clock - started);
      sizes.push(size);
      offset += size;
    }
  }
  return {sizes, use: busy / clock, signal: {...meter.signal}};
}
"""


@pytest.fixture
def sender(chromium):
    """A page holding capture-send.js alone."""
    context = chromium.new_context()
    page = context.new_page()
    page.add_script_tag(path=str(SCRIPT))
    yield page
    context.close()


def simulate(page, rate: float, rtt: float, photos: int = 12, photo: int = 70_000) -> dict:
    """The pieces the phone sends on a simulated link."""
    return page.evaluate(SIMULATE, [rate, rtt, photos, photo])


def test_pieces_grow_on_a_fast_link(sender):
    run = simulate(sender, rate=1_000_000, rtt=0.05, photos=4, photo=2_000_000)
    sizes = run["sizes"]
    assert sizes[0] == 32 * 1024  # before anything is measured
    # 0.8 s of this link (PIECE_SECONDS): many times the first piece
    assert max(sizes[3:]) >= 800_000 and min(sizes[3:-1]) > 4 * sizes[0], sizes
    assert run["signal"]["rate"] == pytest.approx(1_000_000, rel=0.01)
    assert run["signal"]["rtt"] == pytest.approx(0.05, rel=0.05)


def test_pieces_shrink_on_a_slow_link(sender):
    run = simulate(sender, rate=2_000, rtt=0.3, photos=2)
    sizes = run["sizes"]
    assert sizes[0] == 32 * 1024
    # About PIECE_SECONDS (0.8 s) of this link, down to the smallest piece the server takes
    # (a photo's last takes its small rest along): a drop costs seconds, not the quarter of
    # a minute the first piece took.
    assert sizes[1] == 16 * 1024 and max(sizes[1:]) < 2 * 16 * 1024, sizes
    assert sizes.count(16 * 1024) >= len(sizes) - 3, sizes
    assert run["signal"]["rate"] == pytest.approx(2_000, rel=0.01)


@pytest.mark.parametrize("rtt", [0.15, 0.3])
def test_on_one_bar_a_piece_outlasts_a_round_trip(sender, rtt):
    # 200 kbit/s up; the round trip and the server's answer wait beyond each piece's bytes.
    # With two pieces on their way, half a round apart, one is sent while the other's answer
    # comes back: the link idles only if a piece is sent faster than a round trip.
    wait = rtt + 0.03
    run = simulate(sender, rate=25_000, rtt=wait)
    assert run["signal"]["rtt"] == pytest.approx(wait, rel=0.05)
    assert run["signal"]["rate"] == pytest.approx(25_000, rel=0.01)
    settled = run["sizes"][4:]
    assert min(settled) / 25_000 >= 1.2 * wait, run["sizes"]
    # ... yet a drop costs two seconds of sending at most.
    assert max(settled) / 25_000 <= 2.0, run["sizes"]


def test_a_rest_too_small_for_a_round_trip_goes_with_its_piece(sender):
    signal = {"rate": 25_000, "rtt": 0.2}  # pieces of 20,000 bytes (0.8 s)
    size = sender.evaluate("([left, s]) => CaptureSend.pieceSize(left, s)", [36_000, signal])
    assert size == 36_000
    size = sender.evaluate("([left, s]) => CaptureSend.pieceSize(left, s)", [70_000, signal])
    assert size == 20_000
    signal = {"rate": 25_000, "rtt": 0.9}  # a far link: a round trip and a fifth, 27,000 bytes
    size = sender.evaluate("([left, s]) => CaptureSend.pieceSize(left, s)", [200_000, signal])
    assert size == 27_000
    signal = {"rate": 25_000, "rtt": 3}  # a slow answer: no more than 2 s of sending at once
    size = sender.evaluate("([left, s]) => CaptureSend.pieceSize(left, s)", [200_000, signal])
    assert size == 50_000


def test_time_left_is_said_only_once_the_signal_is_measured(sender):
    assert sender.evaluate("() => CaptureSend.secondsLeft(100000, 2)") is None
