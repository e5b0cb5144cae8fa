"""Bad input, both ways. From the venue: a bad checksum and a missing required tag are
refused by the gateway's session (logged, the session stays up); a report for an order the
OMS never sent, and a fill beyond an order's quantity, are handed on and the OMS refuses them
without writing to its log. To the exchange: the same refusals, and a business reject for
what it does not support."""

from __future__ import annotations

import pytest

from foxhunt.execution import venue as v
from foxhunt.live.fix.codec import fix_time
from foxhunt.orders import OrderRequest, Side
from foxhunt.orders.errors import IllegalTransition, UnknownOrderError
from foxhunt.orders.state import OrderStatus

from .helpers import SEC, T0, engine, es_market, exchange, free_port, gateway, until
from .rawfix import RawAcceptor, RawPeer, stamp


def _er(cid: str, exec_type: str, status: str, *, exec_id: str, qty: int = 1, last: int = 0,
        drop: int | None = None) -> list[tuple[int, str]]:  # fmt: skip
    body = [(37, "V-1"), (11, cid), (17, exec_id), (150, exec_type), (39, status), (55, "ES"),
            (54, "1"), (38, str(qty)), (151, "0" if last else str(qty)), (14, str(last)),
            (6, "5000" if last else "0"), (60, fix_time(T0 + 10 * SEC))]  # the OMS's day
    if last:
        body += [(32, str(last)), (31, "5000.25")]
    return [(t, x) for t, x in body if t != drop]


def test_the_gateway_refuses_bad_messages_and_the_oms_refuses_impossible_reports(tmp_path):
    fake = RawAcceptor()
    venue = gateway(tmp_path, fake.port)
    peer = fake.peer()
    eng = engine(f"sqlite:///{tmp_path / 'log.sqlite'}", venue)
    try:
        # a bad checksum: dropped by the session (the sequence number is not used up)
        peer.send("8", _er("O-1", "0", "0", exec_id="E1"), bad_checksum=True)
        # a missing required tag (ExecID): a session Reject names it
        peer.send("8", _er("O-1", "0", "0", exec_id="E1", drop=17), seq=peer.seq)
        reject = peer.expect("3")
        assert (reject.get(45), reject.get(371), reject.get(373)) == (b"2", b"17", b"1")
        assert venue.reports() == [] and venue.connected

        # a fill for an order the OMS never sent: handed on, refused, nothing logged
        peer.send("8", _er("X-9", "F", "2", exec_id="E2", last=1))
        got: list = []
        until(lambda: got.extend(venue.reports()) or got, what="the unknown order's fill")
        assert isinstance(got[0], v.Filled) and got[0].client_order_id == "X-9"
        seq = eng.store.last_seq()
        with pytest.raises(UnknownOrderError):
            eng.on_report(got[0])
        assert eng.store.last_seq() == seq

        # a fill beyond the order's quantity: refused, nothing logged
        order = eng.submit(OrderRequest("ES", Side.BUY, 1), T0 + 1)
        nos = peer.expect("D")
        assert (nos.get(11), nos.get(54), nos.get(38), nos.get(40)) == (b"O-1", b"1", b"1", b"1")
        peer.send("8", _er("O-1", "0", "0", exec_id="E3"))
        peer.send("8", _er("O-1", "F", "2", exec_id="E4", qty=1, last=5))
        got.clear()
        until(lambda: got.extend(venue.reports()) or len(got) >= 2, what="two reports")
        eng.on_report(got[0])
        assert order.status is OrderStatus.ACCEPTED
        seq = eng.store.last_seq()
        with pytest.raises(IllegalTransition, match="exceeds the 1 contracts left"):
            eng.on_report(got[1])
        assert eng.store.last_seq() == seq and order.filled_qty == 0

        # the session is up: a test request is answered
        peer.send("1", [(112, "PING")])
        assert peer.expect("0").get(112) == b"PING"
        assert venue.connected and venue.refused == 0
        assert [type(r).__name__ for r in venue.history] == ["Filled", "Accepted", "Filled"]
    finally:
        venue.shutdown()
        peer.close()
        fake.close()


def test_the_exchange_refuses_bad_messages_and_rejects_what_it_does_not_take(tmp_path):
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    peer = RawPeer.connect(port, "FOXHUNT", "FOXHUNT-EX")
    try:
        peer.send("A", [(98, "0"), (108, "30")])
        peer.expect("A")
        order = [(11, "R-1"), (55, "ES"), (54, "1"), (38, "1"), (40, "1"), (59, "1"),
                 (60, stamp())]  # fmt: skip
        peer.send("D", order, bad_checksum=True)  # dropped
        peer.send("D", [t for t in order if t[0] != 54], seq=peer.seq)  # no Side
        reject = peer.expect("3")
        assert (reject.get(371), reject.get(373)) == (b"54", b"1")
        peer.send("D", [(11, "R-2"), *order[1:]])
        accepted = peer.expect("8")
        assert (accepted.get(11), accepted.get(150)) == (b"R-2", b"0")
        peer.send("D", [(11, "R-3"), (55, "ZZ"), *order[2:]])
        rejected = peer.expect("8")
        assert (rejected.get(150), rejected.get(103)) == (b"8", b"1")
        assert b"unknown symbol 'ZZ'" in rejected.get(58)
        peer.send("D", [(11, "R-4"), (55, "ES"), (54, "1"), (38, "1"), (40, "2"), (44, "5000.1"),
                        (60, stamp())])  # fmt: skip
        off_grid = peer.expect("8")
        assert off_grid.get(150) == b"8" and b"off the 0.25 tick grid" in off_grid.get(58)
        peer.send("g", [(335, "S-1"), (263, "0")])  # a trading session status request
        bmr = peer.expect("j")
        assert (bmr.get(372), bmr.get(380)) == (b"g", b"3")
        peer.send("V", [(262, "M-1"), (263, "1"), (264, "1"), (267, "1"), (269, "4"),
                        (146, "1"), (55, "ZZ")])  # fmt: skip
        md = peer.expect("Y")
        assert (md.get(262), md.get(281)) == (b"M-1", b"0")
        peer.send("1", [(112, "PING")])
        assert peer.expect("0").get(112) == b"PING"
        assert ex.status()["logged_on"] == ["FOXHUNT"] and ex.status()["orders"] == 3
    finally:
        peer.close()
        ex.stop()
