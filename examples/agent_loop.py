"""An agent loop: a model writes code, kiln runs it in a sandbox, the model
reads the result and tries again until it works. The "model" here answers
from a script so the example runs anywhere; put your LLM call in write_code."""
import sys

from kiln import Sandbox

TASK = "Print the 30th Fibonacci number."
SCRIPT = [  # what a model might write: a first try that fails, then a fix
    "def fib(n):\n    return fib(n - 1) + fib(n - 2)\n\nprint(fib(30))\n",
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint(fib(30))\n",
]


def write_code(task: str, feedback: list) -> str:
    """Ask the model for code, given the task and what went wrong so far."""
    return SCRIPT[min(len(feedback), len(SCRIPT) - 1)]


with Sandbox.create(template="base", ttl_seconds=600) as sb:
    feedback: list = []
    for step in range(1, 6):
        sb.files.write("/work/solution.py", write_code(TASK, feedback))
        result = sb.exec("python3 solution.py", cwd="/work", timeout=60)
        print(f"step {step}: exit code {result.exit_code}")
        if result.ok:
            print(f"answer: {result.stdout.strip()}")
            break
        feedback.append(result.stderr[-2000:])  # the model reads the error next time
    else:
        sys.exit("no working solution")
