"""The loop's futures and tasks: a result to wait for, a coroutine run one step at a time on the
loop (cancelled at its wait), and a timer. router/runtime/loop.py runs them."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.runtime.loop import Loop


class Cancelled(BaseException):
    """The task was cancelled (the bridge's `cancel`): raised at the wait it was in."""


class Future:
    """A value that arrives later; `await` it inside a task of the loop."""

    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future], None]] = []

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        if not self._done:
            self._done, self._value = True, value
            self._fire()

    def set_exception(self, error: BaseException) -> None:
        if not self._done:
            self._done, self._error = True, error
            self._fire()

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        if self._done:
            self.loop.call_soon(callback, self)
        else:
            self._callbacks.append(callback)

    def _fire(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self.loop.call_soon(callback, self)

    def __await__(self) -> Generator[Future, None, Any]:
        if not self._done:
            yield self
        return self.result()


class Task(Future):
    """A coroutine run step by step; it waits only on futures of this loop."""

    def __init__(self, loop: Loop, coro: Coroutine[Any, Any, Any]) -> None:
        super().__init__(loop)
        self.coro = coro
        self.waiting: Future | None = None
        loop.call_soon(self._step, None, None)

    def cancel(self) -> bool:
        """Raise `Cancelled` at the task's wait; False when it is done already."""
        if self._done:
            return False
        self.waiting = None  # a late result of the wait is ignored
        self.loop.call_soon(self._step, None, Cancelled())
        return True

    def cancelled(self) -> bool:
        return isinstance(self._error, Cancelled)

    def _step(self, value: Any, error: BaseException | None) -> None:
        if self._done:
            return
        self.waiting = None
        try:
            yielded = self.coro.throw(error) if error is not None else self.coro.send(value)
        except StopIteration as stop:
            self.set_result(stop.value)
            return
        except BaseException as exc:  # Cancelled included: the task ends with it
            self.set_exception(exc)
            return
        if not isinstance(yielded, Future):
            self.loop.call_soon(self._step, None, RuntimeError(f"a task awaited {yielded!r}"))
            return
        self.waiting = yielded
        yielded.add_done_callback(self._wake)

    def _wake(self, future: Future) -> None:
        if future is not self.waiting or self._done:
            return
        try:
            value = future.result()
        except BaseException as exc:
            self._step(None, exc)
        else:
            self._step(value, None)


class Timer:
    def __init__(self, when: float, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.when, self.callback, self.args = when, callback, args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
