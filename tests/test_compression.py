"""Compressed page answers: Brotli's window sized to the page."""
from __future__ import annotations

import brotli

from services.platform.compression import _compress, window_bits


def test_the_window_just_holds_the_answer_from_16_to_22_bits():
    assert [window_bits(n) for n in (0, 600, 65_520, 65_521, 200_000, 10_000_000)] == \
        [16, 16, 16, 17, 18, 22]


def test_a_page_is_sent_with_the_small_window_and_reads_back_whole():
    page = b"".join(b"<tr><td>Ticket %d</td><td>Moved a wall %d mm</td></tr>\n" % (i, i * 7)
                    for i in range(900))
    body = _compress(page, "br", best=False)
    assert brotli.decompress(body) == page
    assert body[0] & 1 == 0  # RFC 7932 9.1: a first bit of 0 is a 16-bit window (22 would be 1)
