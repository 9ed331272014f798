"""A third-party inferfit plugin: one probe that reads the box's kernel release."""

from __future__ import annotations

from inferfit.findings import ProbeResult
from inferfit.hookspecs import hookimpl


class KernelReleaseProbe:
    name = "kernel_release"
    title = "Kernel release"

    async def check(self, host, ctx):  # type: ignore[no-untyped-def]
        done = await host.run(["uname", "-r"], timeout=10)
        release = done.stdout.strip()
        return ProbeResult(self.name, "ok", f"kernel {release}", values={"release": release})


@hookimpl
def inferfit_register_probes(register):  # type: ignore[no-untyped-def]
    register(KernelReleaseProbe())
