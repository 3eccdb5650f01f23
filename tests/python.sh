# Sourced by the test runners (tests/run, tests/sdk/run, tests/cluster/run).
# Where python3 is a pyenv shim, a shell script that runs several more to
# choose the interpreter (measured here: 0.1 s for each python3 started on
# a quiet machine, up to 3 s on a loaded one, against 0.02 s), and the
# tests start thousands of them, put the interpreter it chooses first on
# PATH: the same Python, with the same packages, started directly.
if _py=$(command -v python3) && [[ $_py == */shims/python3 ]] &&
   _py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$_py" ]; then
	PATH=${_py%/*}:$PATH
	export PATH
fi
unset _py
