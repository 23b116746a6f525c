"""Terminal output for the CLI: messages on stderr, results on stdout, progress bars that scripts can silence."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun in the right number: "1 entity", "11 entities", "2 relation labels"."""
    if count == 1:
        return f"{count:,} {noun}"
    if plural is None:
        plural = noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"
    return f"{count:,} {plural}"


class Output:
    """Where the CLI writes: `out` for results (stdout), `err` for messages and progress (stderr)."""

    def __init__(self, quiet: bool = False, out: Console | None = None, err: Console | None = None):
        self.quiet = quiet
        self.out = out or Console(soft_wrap=True)
        self.err = err or Console(stderr=True, soft_wrap=True)

    def info(self, message: str) -> None:
        if not self.quiet:
            self.err.print(message)

    def error(self, message: str) -> None:
        self.err.print(f"kgr: error: {message}", markup=False, highlight=False)

    @contextmanager
    def progress(self) -> Iterator[Callable[[str, int], Callable[[int], None]]]:
        """Yield a factory: `task(description, total)` returns `advance(n)`; silent when quiet."""
        if self.quiet:
            yield lambda description, total: (lambda n: None)
            return
        columns = (
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
            TextColumn("[dim]{task.fields[rate]}"), TimeRemainingColumn(),
        )
        # Started on the first task only, so commands that fail or finish early print no empty progress line.
        bar = Progress(*columns, console=self.err, transient=False)

        def task(description: str, total: int) -> Callable[[int], None]:
            if not bar.live.is_started:
                bar.start()
            task_id = bar.add_task(description, total=total, rate="")

            def advance(n: int) -> None:
                bar.advance(task_id, n)
                speed = bar.tasks[task_id].speed
                bar.update(task_id, rate=f"{speed:,.0f}/s" if speed else "")

            return advance

        try:
            yield task
        finally:
            if bar.live.is_started:
                bar.stop()
