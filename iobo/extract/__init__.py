"""Extract a C program's I/O kernel from its source (``iobo extract``, issue 29).

The program's sources are parsed with Clang (the ``libclang`` wheel,
:mod:`iobo.extract.parse`); every statement of its functions is kept or
dropped by a backward slice from its I/O calls (:mod:`iobo.extract.slice`,
over the reads and writes :mod:`iobo.extract.effects` finds and the call
classes of :mod:`iobo.extract.calls`); the kept statements are written as the
kernel's sources with the dropped ones blanked, line for line
(:mod:`iobo.extract.emit`), built with the program's compiler
(:mod:`iobo.extract.build`) and run once under the shim
(:mod:`iobo.extract.run`); :mod:`iobo.extract.view` shows what was kept. Options change the kernel's
source: ``--reduce-loops k`` gates 1 in k of the I/O its loops repeat (:mod:`iobo.extract.loops`, the counts
scaled back by :mod:`iobo.extract.scaling`), ``--redirect DIR`` switches the names of the files it creates into
DIR (:mod:`iobo.extract.redirect`); both through the C helper :mod:`iobo.extract.helper` writes.
:func:`iobo.extract.pipeline.extract` does it all.

Clang is imported only when a source is parsed: ``import iobo.extract`` stays light.
"""

from iobo.errors import IoboError


class ExtractError(IoboError):
    """A program the extraction cannot turn into a kernel: it does not parse, its kernel does not build or run.
    The message names the file, line and construct, and says to tune the recorded kernel or the program."""
