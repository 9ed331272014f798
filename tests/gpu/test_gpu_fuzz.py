"""Arbitrary text never crashes a GPU parser: it parses, or raises ParseError."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inferfit.probes.gpu_events import classify_failure, parse_topology, parse_xid
from inferfit.probes.gpu_parse import (
    ParseError,
    parse_list,
    parse_query_csv,
    parse_smi_table,
    parse_smi_xml,
    parse_stream_line,
)

# Text built from the pieces real output is made of, so the parsers get past their
# first checks often.
PIECES = st.sampled_from([
    "<?xml version=\"1.0\" ?>", "<nvidia_smi_log>", "</nvidia_smi_log>", "<gpu id=\"0:1:0\">",
    "</gpu>", "<fb_memory_usage><total>", "</total>", "81559 MiB", "N/A", "[N/A]", "\n", ", ",
    "index, name, memory.total [MiB]", "0, NVIDIA H100, 81559 MiB", "GPU0", "\tGPU1", " X ",
    "NV18", "PHB", "CPU Affinity", "NVRM: Xid (PCI:0000:3b:00): ", "79", ", pid=1, ",
    "|   0  NVIDIA H100 80GB HBM3          On  |", "| N/A   30C    P0  100W /  700W |",
    "GPU 0: A100 (UUID: GPU-1)", "  MIG 1g.10gb     Device  0: (UUID: MIG-1)", "&amp;", "<",
])
TEXT = st.one_of(st.text(max_size=300), st.lists(PIECES, max_size=40).map("".join))


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_parsers_never_crash(text):
    for parser in (parse_smi_xml, parse_query_csv, parse_smi_table):
        try:
            snap = parser(text)
        except ParseError:
            continue
        assert isinstance(snap["devices"], list)
    parse_topology(text)
    parse_xid(text)
    parse_list(text)
    parse_stream_line(text)
    classify_failure(1, text, text)
