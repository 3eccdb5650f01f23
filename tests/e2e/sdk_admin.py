"""The Python SDK's API keys, audit log and operator client against a real
kilnd (tests/e2e/58-kilnd-sdk-admin.sh runs it, PYTHONPATH=sdk/python).

    python3 sdk_admin.py URL WORKSPACE_KEY OPERATOR_CREDENTIAL PREFIX

WORKSPACE_KEY is a full key of a workspace of its own; PREFIX names the
workspaces this makes (it deletes them at its end). Prints "PASS name:
detail" / "FAIL name: why", and "PASS sdk_py_ran" once it reached its end.
"""

import sys
import time

import kiln
from kiln import Admin, AuthError, Client, Conflict, InvalidRequest, NotFound, PermissionDenied

URL, KEY, OP, PREFIX = sys.argv[1:5]
NAME = "sdk_py"
failed = 0


def check(name, fn):
    """Run one check: it returns its detail, or raises AssertionError (or
    anything else) to fail. Returns what fn returned, None on failure."""
    global failed
    try:
        detail = fn()
    except AssertionError as e:
        failed += 1
        print(f"FAIL {NAME}_{name}: {e}", flush=True)
        return None
    except Exception as e:  # an unexpected error fails the check, naming it
        failed += 1
        print(f"FAIL {NAME}_{name}: {type(e).__name__}: {e}", flush=True)
        return None
    print(f"PASS {NAME}_{name}: {detail}", flush=True)
    return detail if detail is not None else True


def raises(cls, fn, *args, **kw):
    """The exception of class cls that fn(...) raised (AssertionError if none, or another)."""
    try:
        got = fn(*args, **kw)
    except cls as e:
        return e
    except Exception as e:
        raise AssertionError(f"wanted {cls.__name__}, got {type(e).__name__}: {e}")
    raise AssertionError(f"wanted {cls.__name__}, got no error but {got!r}")


def eventually(fn, timeout=3.0):
    """fn() until it is truthy (the audit log is written once a request is
    answered, so an entry may show a few milliseconds after it)."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(0.05)


client = Client(URL, KEY, max_retries=0)
admin = Admin(URL, OP, max_retries=0)
made = {}

# ---- API keys ------------------------------------------------------------------------------


def key_create():
    k = client.create_key("py-ci", scope="full", expires_in_seconds=3600)
    assert set(k) >= {"id", "key", "prefix", "name", "scope", "expires_at"}, k
    assert k["key"].startswith("kiln_") and k["prefix"] == k["key"][:13], k
    assert k["name"] == "py-ci" and k["scope"] == "full" and k["expires_at"], k
    made["full"] = k
    return f"{k['id']} {k['prefix']}... expires {k['expires_at']}"


def key_works():
    c = Client(URL, made["full"]["key"], max_retries=0)
    ids = [k["id"] for k in c.keys()]
    assert made["full"]["id"] in ids, ids
    return f"the new key lists its workspace's {len(ids)} keys, itself among them"


def key_listed():
    k = next((k for k in client.keys() if k["id"] == made["full"]["id"]), None)
    assert k is not None, "not in keys()"
    assert k["prefix"] == made["full"]["prefix"] and k["name"] == "py-ci" and k["scope"] == "full", k
    assert k["revoked"] is False and k["expires_at"] == made["full"]["expires_at"], k
    assert "key" not in k, "keys() shows a key's secret"
    return f"{k['id']} {k['name']} {k['scope']} created {k['created_at']}, no secret"


def read_key():
    r = client.create_key("py-read", scope="read")
    assert r["scope"] == "read" and r["expires_at"] is None, r
    made["read"] = r
    c = Client(URL, r["key"], max_retries=0)
    n = len(c.keys())  # a GET: allowed
    e = raises(PermissionDenied, c.create_key, "by-read")
    assert e.status == 403 and e.code == "forbidden" and e.message, (e.status, e.code, e.message)
    made["read_refused"] = e
    return f"GET /v1/keys ({n} keys) allowed; create_key refused: {e}"


def revoke():
    c = Client(URL, made["full"]["key"], max_retries=0)
    c.limits()
    client.revoke_key(made["full"]["id"])
    e = raises(AuthError, c.keys)
    assert e.status == 401 and e.code == "unauthorized", e
    assert "revoked" in e.message and "KILN_API_KEY" in e.message, e.message
    k = next(k for k in client.keys() if k["id"] == made["full"]["id"])
    assert k["revoked"] is True and k.get("revoked_at"), k
    client.revoke_key(made["full"]["id"])  # again: no error
    return f"the next request: {e}; listed revoked at {k['revoked_at']}; revoking again is no error"


def revoke_unknown():
    e = raises(NotFound, client.revoke_key, "key_doesnotexist")
    raises(ValueError, client.revoke_key, "../audit")
    return f"{e}; a path-changing id is refused here (ValueError)"


def bad_create():
    e = raises(InvalidRequest, client.create_key, "x", scope="admin")  # type: ignore[arg-type]
    assert "scope" in e.message, e.message
    e2 = raises(InvalidRequest, client.create_key, "x", expires_in_seconds=0)
    assert "expires_in_seconds" in e2.message, e2.message
    return f"{e}; {e2}"


def audit():
    def entries():
        es = client.audit()
        want = [("POST", "/v1/keys", 201, made["full"]["id"]), ("POST", "/v1/keys", 403, None),
                ("DELETE", "/v1/keys/{id}", 204, made["full"]["id"])]
        have = [(e["method"], e["route"], e["status"], e["target"]) for e in es]
        return es if all(w in have for w in want) else None
    es = eventually(entries)
    assert es, f"missing entries: {[(e['method'], e['route'], e['status'], e['target']) for e in client.audit()]}"
    refused = next(e for e in es if e["status"] == 403)
    assert refused["key_prefix"] == made["read"]["prefix"] and refused["key_id"] == made["read"]["id"], refused
    assert [e["time"] for e in es] == sorted((e["time"] for e in es), reverse=True), "not newest first"
    assert all(e["method"] != "GET" for e in es), "a GET in the audit log"
    return f"{len(es)} entries, newest first: the key's creation, the read key's refused create, the revocation"


def audit_limit():
    es = client.audit(limit=2)
    assert isinstance(es, list) and isinstance(es, kiln.AuditPage), type(es)
    assert len(es) == 2 and es == client.audit()[:2], es
    assert isinstance(es.next_cursor, str) and es.next_cursor, es.next_cursor
    e = raises(InvalidRequest, client.audit, limit=0)
    assert "limit" in e.message, e.message
    return f"limit=2: {len(es)} entries, the newest, a list as before, next_cursor {es.next_cursor}; limit=0: {e}"


def audit_paging():
    every = client.audit(limit=1000)
    assert every.next_cursor is None and len(every) >= 4, (len(every), every.next_cursor)
    # By hand: pages of 2, each page's next_cursor passed as cursor.
    pages, cursor = [], None
    while True:
        page = client.audit(2, cursor=cursor)
        assert len(page) <= 2, page
        pages.append(page)
        if page.next_cursor is None:
            break
        assert len(page) == 2, f"a page of {len(page)} with a next_cursor"
        cursor = page.next_cursor
        assert len(pages) <= len(every) + 1, "the cursors never end"
    paged = [e for p in pages for e in p]
    ids = [e["id"] for e in paged]
    assert len(ids) == len(set(ids)), f"an entry twice: {ids}"
    assert paged == list(every), f"paged {ids} != unpaged {[e['id'] for e in every]}"
    # The generator: the same, a page of 2 at a time.
    it = client.iter_audit(page_size=2)
    assert iter(it) is it, "iter_audit is no iterator"
    gen = list(it)
    assert gen == list(every), f"iter_audit {[e['id'] for e in gen]} != {[e['id'] for e in every]}"
    assert list(client.iter_audit()) == list(every), "iter_audit with its default page size"
    e = raises(InvalidRequest, client.audit, cursor="nonsense")
    assert "cursor" in e.message, e.message
    return f"{len(every)} entries: {len(pages)} pages of limit=2 and iter_audit(page_size=2) each yield them once, " \
           f"as the unpaged list; a made-up cursor: {e}"


def audit_key():
    every = list(client.iter_audit())
    rid, rprefix = made["read"]["id"], made["read"]["prefix"]
    by_id = client.audit(key=rid, limit=1000)
    assert by_id and all(e["key_id"] == rid for e in by_id), by_id
    assert list(by_id) == [e for e in every if e["key_id"] == rid], "not every entry of the read key"
    assert list(client.audit(key=rprefix, limit=1000)) == list(by_id), "by prefix != by id"
    mine = [e for e in every if e["key_prefix"] == KEY[:13]]
    assert mine and list(client.iter_audit(key=KEY[:13], page_size=2)) == mine, "the test key's entries, paged"
    none = client.audit(key=made["full"]["id"])  # it only made GETs
    assert list(none) == [] and none.next_cursor is None, none
    return f"the read key's {len(by_id)} entries by id and by prefix; the test key's {len(mine)}, paged by 2; " \
           "a key that made only GETs: none"


for name, fn in [("key_create", key_create), ("key_works", key_works), ("key_listed", key_listed),
                 ("read_key_refused", read_key), ("revoke_401", revoke), ("revoke_unknown", revoke_unknown),
                 ("key_bad_fields", bad_create), ("audit", audit), ("audit_limit", audit_limit),
                 ("audit_paging", audit_paging), ("audit_key", audit_key)]:
    check(name, fn)

# ---- the operator's client ----------------------------------------------------------------------

WS = PREFIX + "-py"


def ws_create():
    w = admin.create_workspace(WS, plan="free", limits={"running": 2})
    assert w["name"] == WS and w["plan"] == "free" and w["limits"] == {"running": 2}, w
    assert w["suspended"] is False and w["live_sandboxes"] == 0 and w["id"].startswith("ws_"), w
    made["ws"] = w
    e = raises(Conflict, admin.create_workspace, WS)
    e2 = raises(InvalidRequest, admin.create_workspace, WS + "x", plan="gold")
    assert "gold" in e2.message, e2.message
    e3 = raises(InvalidRequest, admin.create_workspace, "Bad_Name")
    return f"{w['id']} {w['name']} plan {w['plan']} limits {w['limits']}; again: {e}; {e2}; {e3}"


def ws_list():
    ws = admin.workspaces()
    mine = [w for w in ws if w["name"] == WS]
    assert len(mine) == 1 and mine[0]["id"] == made["ws"]["id"], ws
    got = admin.get_workspace(WS)
    assert got["id"] == made["ws"]["id"] and got["plan"] == "free", got
    e = raises(NotFound, admin.get_workspace, WS + "-none")
    raises(ValueError, admin.get_workspace, "../keys")
    return f"{len(ws)} workspaces, {WS} among them; get_workspace agrees; unknown: {e}"


def ws_key():
    k = admin.create_key(WS, "ops-made", scope="full")
    assert k["key"].startswith("kiln_") and k["name"] == "ops-made", k
    made["ws_key"] = k
    lim = Client(URL, k["key"], max_retries=0).limits()
    assert lim["plan"] == "free" and lim["limits"]["running"] == 2, lim
    return f"{k['id']} works: its workspace's plan {lim['plan']}, running limit {lim['limits']['running']}"


def ws_keys():
    ks = admin.keys(WS)
    assert [k["id"] for k in ks] == [made["ws_key"]["id"]], ks
    k = ks[0]
    assert k["prefix"] == made["ws_key"]["prefix"] and k["name"] == "ops-made" and k["revoked"] is False, k
    assert "key" not in k, "keys() shows a key's secret"
    e = raises(NotFound, admin.keys, WS + "-none")
    raises(ValueError, admin.keys, "../audit")
    return f"{WS}: {k['id']} {k['prefix']}... {k['scope']}, no secret; an unknown workspace: {e}"


def ws_revoke():
    k = admin.create_key(WS, "ops-revoked")
    made["ws_revoked"] = k
    c = Client(URL, k["key"], max_retries=0)
    c.limits()
    admin.revoke_key(WS, k["id"])
    e = raises(AuthError, c.limits)
    assert e.status == 401 and e.code == "unauthorized" and "revoked" in e.message, e
    listed = {x["id"]: x for x in admin.keys(WS)}
    assert listed[k["id"]]["revoked"] is True and listed[k["id"]].get("revoked_at"), listed
    assert listed[made["ws_key"]["id"]]["revoked"] is False, "the other key was revoked too"
    admin.revoke_key(WS, k["id"])  # again: no error
    # Another workspace's key (this script's own read key): not this one's.
    e2 = raises(NotFound, admin.revoke_key, WS, made["read"]["id"])
    assert Client(URL, made["read"]["key"], max_retries=0).keys(), "the other workspace's key stopped working"
    raises(ValueError, admin.revoke_key, WS, "../../x")
    raises(ValueError, admin.revoke_key, "Bad/Name", k["id"])
    return f"{k['id']} revoked, its next request: {e}; again: no error; another workspace's key: {e2} " \
           f"(and it still works); path-changing names refused here (ValueError)"


def ws_plan():
    w = admin.update_workspace(WS, plan="pro")
    assert w["plan"] == "pro" and w["limits"] == {"running": 2}, w
    lim = Client(URL, made["ws_key"]["key"], max_retries=0).limits()
    assert lim["plan"] == "pro", lim
    w = admin.update_workspace(WS, limits={})
    assert w["plan"] == "pro" and w["limits"] == {}, w
    e = raises(InvalidRequest, admin.update_workspace, WS, limits={"runing": 1})
    assert "runing" in e.message, e.message
    return f"plan pro (own limits kept), then limits {{}} (plan kept); the key sees plan {lim['plan']}; {e}"


def ws_suspend():
    c = Client(URL, made["ws_key"]["key"], max_retries=0)
    w = admin.update_workspace(WS, suspended=True)
    assert w["suspended"] is True, w
    e = raises(PermissionDenied, c.keys)
    assert e.status == 403 and e.code == "workspace_suspended" and WS in e.message, e
    w = admin.update_workspace(WS, suspended=False)
    assert w["suspended"] is False, w
    n = len(c.keys())
    return f"suspended: {e}; lifted: the key lists {n} keys again"


def ws_audit():
    c = Client(URL, made["ws_key"]["key"], max_retries=0)
    # Four changes: the plan, the limits, suspended, lifted (the refused
    # limits were answered 400 before any change: no entry).
    es = eventually(lambda: len([e for e in c.audit() if e["method"] == "PATCH"]) == 4 and
                    [e for e in c.audit() if e["method"] == "PATCH"])
    assert es and all(e["route"] == "/v1/admin/workspaces/{name}" and e["status"] == 200 for e in es), \
        f"PATCH entries: {[e for e in c.audit() if e['method'] == 'PATCH']}"
    assert all(e["key_prefix"] == OP[:15] and e["key_id"].startswith("op_") for e in es), es
    return f"the workspace's audit log has the operator's 4 PATCHes, by {es[0]['key_prefix']}..."


def ws_audit_targets():
    c = Client(URL, made["ws_key"]["key"], max_retries=0)
    ws_id, kid, rid = made["ws"]["id"], made["ws_key"]["id"], made["ws_revoked"]["id"]
    want = [("POST", "/v1/admin/workspaces", 201, ws_id),
            ("POST", "/v1/admin/workspaces/{name}/keys", 201, kid),
            ("POST", "/v1/admin/workspaces/{name}/keys", 201, rid),
            ("DELETE", "/v1/admin/workspaces/{name}/keys/{id}", 204, f"{WS}/{rid}")]

    def have():
        return [(e["method"], e["route"], e["status"], e["target"]) for e in c.iter_audit(key=OP[:15], page_size=2)]
    got = eventually(lambda: all(w in have() for w in want) and have())
    assert got, f"want {want} among the operator's entries: {have()}"
    ops = list(c.iter_audit(key=OP[:15]))
    assert all(e["key_id"].startswith("op_") for e in ops), ops
    assert ops == [e for e in c.iter_audit() if e["key_prefix"] == OP[:15]], "key=the operator's prefix"
    return f"the workspace's creation names {ws_id}, the keys made {kid} and {rid}, the revocation {WS}/{rid}; " \
           f"{len(ops)} entries of the operator (key={OP[:15]})"


def usage():
    u = admin.usage()
    assert set(u) >= {"from", "to", "workspaces", "total"}, u
    mine = [w for w in u["workspaces"] if w["name"] == WS]
    assert len(mine) == 1 and mine[0]["cost_microdollars"] == 0, u["workspaces"]
    u2 = admin.usage(from_="2026-01-01", to=1767312000)
    # kilnd read the date and the Unix seconds: 2026-01-01T00:00:00.000Z
    assert u2["from"].startswith("2026-01-01T00:00:00") and u2["to"].startswith("2026-01-02T00:00:00"), u2
    e = raises(InvalidRequest, admin.usage, from_="2026-02-01", to="2026-01-01")
    return f"{len(u['workspaces'])} workspaces from {u['from']} to {u['to']}, total {u['total']}; {e}"


def plans():
    name = PREFIX.replace("_", "-")[:20] + "-py-plan"
    names = [p["name"] for p in admin.plans()]
    assert names[:4] == ["free", "pro", "team", "enterprise"], names
    p = admin.set_plan(name, {"running": 2, "vcpus": 1})
    assert p["name"] == name and p["limits"]["running"] == 2 and p["limits"]["vcpus"] == 1, p
    assert p["limits"]["creates_per_hour"] == 0 and not p["server_plan"] and p["operator_limits"] == {"running": 2, "vcpus": 1}, p
    admin.update_workspace(WS, plan=name)
    ws_client = Client(URL, made["ws_key"]["key"], max_retries=0)
    before = ws_client.limits()["limits"]["running"]
    admin.set_plan(name, {"running": 1})
    after = ws_client.limits()["limits"]["running"]
    ws_client.close()
    assert (before, after) == (2, 1), (before, after)
    assert admin.get_plan(name)["operator_limits"] == {"running": 1}
    e = raises(InvalidRequest, admin.set_plan, name, {"runing": 1})
    assert "runing" in e.message, e
    e2 = raises(NotFound, admin.get_plan, "no-such-plan")
    e3 = raises(ValueError, admin.get_plan, "../workspaces")
    e4 = raises(Conflict, admin.delete_plan, name)
    assert e4.status == 409 and "in use by 1 workspace:" in e4.message, e4
    return f"{name}: running 2 then 1, seen by the workspace at once ({before}, {after}); {e}; {e2}; {e3}; on it: {e4}"


def ws_delete():
    admin.delete_workspace(WS)
    e = raises(NotFound, admin.get_workspace, WS)
    assert WS not in [w["name"] for w in admin.workspaces()]
    e2 = raises(AuthError, Client(URL, made["ws_key"]["key"], max_retries=0).keys)
    e3 = raises(NotFound, admin.delete_workspace, WS)
    # Its plan, no workspace on it now, goes; the server's plans do not.
    plan = PREFIX.replace("_", "-")[:20] + "-py-plan"
    admin.delete_plan(plan)
    e4 = raises(NotFound, admin.get_plan, plan)
    e5 = raises(NotFound, admin.delete_plan, plan)
    e6 = raises(Conflict, admin.delete_plan, "free")
    e7 = raises(Conflict, admin.delete_plan, "enterprise")
    assert "server's plans" in e6.message and "default plan" in e7.message, (e6, e7)
    return f"gone: {e}; its key: {e2}; deleting again: {e3}; its plan deleted: {e4}; again: {e5}; free: {e6}; enterprise: {e7}"


def bad_credentials():
    e = raises(AuthError, Admin(URL, "kilnop_abcdefghijkmnpqrstuvwxyz23456789", max_retries=0).workspaces)
    assert e.status == 401 and "operator credential" in e.message and "KILN_ADMIN_KEY" in e.message, e
    e2 = raises(AuthError, Admin(URL, "", max_retries=0).workspaces)
    assert e2.message.startswith("no operator credential: set KILN_ADMIN_KEY"), e2
    e3 = raises(AuthError, Admin(URL, "kilnop_short", max_retries=0).workspaces)
    assert "malformed operator credential" in e3.message, e3
    e4 = raises(PermissionDenied, Admin(URL, KEY, max_retries=0).workspaces)
    assert "API key of a workspace cannot call /v1/admin" in e4.message, e4
    e5 = raises(AuthError, Client(URL, OP, max_retries=0).keys)
    return f"unknown: {e}; none: {e2}; malformed: {e3}; a workspace's key: {e4}; the credential as an API key: {e5}"


try:
    for name, fn in [("admin_ws_create", ws_create), ("admin_ws_list_get", ws_list), ("admin_ws_key", ws_key),
                     ("admin_ws_keys", ws_keys), ("admin_ws_revoke_key", ws_revoke),
                     ("admin_ws_plan_limits", ws_plan), ("admin_ws_suspend", ws_suspend),
                     ("admin_ws_audit", ws_audit), ("admin_ws_audit_targets", ws_audit_targets), ("admin_usage", usage), ("admin_plans", plans), ("admin_ws_delete", ws_delete),
                     ("admin_bad_credential", bad_credentials)]:
        check(name, fn)
finally:
    # What this made: the workspace (if a check left it), the read key.
    try:
        admin.delete_workspace(WS)
    except NotFound:
        pass
    if "read" in made:
        client.revoke_key(made["read"]["id"])
    client.close()
    admin.close()

assert kiln.Admin is Admin
print(f"PASS {NAME}_ran: the script ran to its end ({failed} checks failed)", flush=True)
sys.exit(1 if failed else 0)
