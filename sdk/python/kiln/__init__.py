"""kiln: sandboxes for AI agents, each a microVM with its own kernel.

    from kiln import Sandbox

    with Sandbox.create(template="base") as sb:
        print(sb.exec("python3 -c 'print(6*7)'").stdout)

Configuration comes from arguments or from KILN_API_URL and KILN_API_KEY.
An operator manages workspaces with ``kiln.Admin`` and an operator
credential (KILN_ADMIN_KEY).
"""

from .admin import Admin
from .app import App
from .client import Client, default_client
from .code import Code, CodeContext, Execution, ExecutionError, Result
from .commands import CommandHandle, Commands
from .errors import (AuthError, Conflict, ConnectionFailed, ForkError, InvalidRequest, KilnError,
                     LimitExceeded, NotFound, PermissionDenied, RateLimited, ServerError, Timeout)
from .events import Event, EventStream
from .files import Files
from .processes import Process, Processes, ProcessOutput, ProcessStream
from .pty import Pty
from .sandbox import LANGUAGES, Sandbox
from .types import AuditPage, ExecResult, FileInfo, Snapshot
from .volume import Volume
from .watch import FileWatch, FsEvent, WatchHandle

__version__ = "0.1.0"

__all__ = [
    "Admin", "Client", "default_client", "Sandbox", "Files", "Processes", "Process", "ProcessOutput", "ProcessStream", "Pty", "Commands",
    "CommandHandle", "AuditPage", "ExecResult", "FileInfo", "Snapshot", "LANGUAGES", "FileWatch", "FsEvent", "WatchHandle",
    "Code", "CodeContext", "Execution", "ExecutionError", "Result", "Event", "EventStream",
    "KilnError", "InvalidRequest", "AuthError", "PermissionDenied", "NotFound", "Conflict",
    "RateLimited", "LimitExceeded", "ServerError", "Timeout", "ConnectionFailed", "ForkError",
    "Volume", "App",
]
