"""Registers and creates what the local cloud needs, idempotently, in one interpreter.

    bootstrap.py identity   service project, roles, service users, services and endpoints
    bootstrap.py resources  image, networks, router; waits for Ironic's conductor

Input is a JSON document on stdin (URLs, passwords, names); nothing secret is printed. Every step looks
its object up by name first, so a rerun on a running cloud only reads.
"""

import json
import sys
import time

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

CFG = json.load(sys.stdin)


def admin_session():
    auth = v3.Password(auth_url=CFG["auth_url"], username="admin", password=CFG["admin_password"],
                       project_name="admin", user_domain_name="Default", project_domain_name="Default")
    return ks_session.Session(auth=auth)


SESS = admin_session()


def client(service_type, microversion=None):
    return adapter.Adapter(SESS, service_type=service_type, interface="public", region_name=CFG["region"],
                           default_microversion=microversion, raise_exc=True)


def one(items, what):
    if len(items) > 1:
        raise SystemExit("more than one %s: %s" % (what, [i.get("id") for i in items]))
    return items[0] if items else None


# ---------------------------------------------------------------- identity

def can_login(name, password):
    auth = v3.Password(auth_url=CFG["auth_url"], username=name, password=password, project_name="service",
                       user_domain_name="Default", project_domain_name="Default")
    try:
        ks_session.Session(auth=auth).get_token()
        return True
    except ks_exc.Unauthorized:
        return False


def identity():
    ks = adapter.Adapter(SESS, endpoint_override=CFG["auth_url"], raise_exc=True)

    def listing(kind, **params):
        return ks.get("/%s" % kind, params=params).json()[kind]

    # One listing per kind, then only the writes that are missing: Keystone is slow per request.
    project = one(listing("projects", name="service", domain_id="default"), "project service")
    if project is None:
        project = ks.post("/projects", json={"project": {"name": "service", "domain_id": "default",
                                                         "description": "Service users"}}).json()["project"]
    roles = {r["name"]: r for r in listing("roles")}
    for name in ("admin", "service"):
        if name not in roles:
            roles[name] = ks.post("/roles", json={"role": {"name": name}}).json()["role"]
    users = {u["name"]: u for u in listing("users", domain_id="default")}
    assigned = {(a["user"]["id"], a["role"]["id"])
                for a in ks.get("/role_assignments", params={"scope.project.id": project["id"]}).json()["role_assignments"]
                if "user" in a}
    for name, password in sorted(CFG["service_users"].items()):
        user = users.get(name)
        if user is None:
            user = ks.post("/users", json={"user": {"name": name, "password": password, "domain_id": "default",
                                                     "default_project_id": project["id"]}}).json()["user"]
        elif not can_login(name, password):
            # Passwords live in the state directory; keep Keystone in step if they were regenerated.
            # Only then: a password change revokes the user's tokens.
            ks.patch("/users/%s" % user["id"], json={"user": {"password": password}})
        for role in ("admin", "service"):
            if (user["id"], roles[role]["id"]) not in assigned:
                ks.put("/projects/%s/users/%s/roles/%s" % (project["id"], user["id"], roles[role]["id"]))

    # A shared service (one Glance, Neutron, Placement for the site) lists its endpoints in every
    # region of the site, as a multi-region cloud does, so a client of another region's Nova finds them.
    known = {r["id"] for r in listing("regions")}
    for region in CFG.get("shared_regions", []):
        if region not in known:
            ks.post("/regions", json={"region": {"id": region, "description": "a region of the local site"}})
    services = {(s["type"], s["name"]): s for s in listing("services")}
    endpoints = listing("endpoints")
    for svc in CFG["services"]:
        service = services.get((svc["type"], svc["name"]))
        if service is None:
            service = ks.post("/services", json={"service": {"name": svc["name"], "type": svc["type"],
                                                             "enabled": True}}).json()["service"]
        regions = [CFG["region"]] + (CFG.get("shared_regions", []) if svc.get("shared") else [])
        for region, iface in ((r, i) for r in regions for i in ("public", "internal", "admin")):
            mine = [e for e in endpoints if e["service_id"] == service["id"] and e["interface"] == iface
                    and e.get("region_id") == region]
            url = svc.get(iface, svc["url"])
            if mine and mine[0]["url"] == url:
                continue
            if mine:
                ks.patch("/endpoints/%s" % mine[0]["id"], json={"endpoint": {"url": url}})
            else:
                ks.post("/endpoints", json={"endpoint": {"service_id": service["id"], "interface": iface,
                                                         "url": url, "region_id": region}})
    # The stack once ran a Nova of its own: its compute endpoints in the stack's region go, since every
    # Nova now is stackflow's, registered in a region of its own.
    retired = services.get(("compute", "nova"))
    if retired is not None:
        for e in endpoints:
            if e["service_id"] == retired["id"] and e.get("region_id") == CFG["region"]:
                ks.delete("/endpoints/%s" % e["id"])
    # Services an earlier stack ran and this one does not (its block storage): their catalog entries
    # (endpoints go with the service) and service users go, so no client is sent to a dead endpoint.
    for svc in services.values():
        if svc["name"] in CFG.get("retired_services", []):
            ks.delete("/services/%s" % svc["id"])
    for name in CFG.get("retired_users", []):
        if name in users:
            ks.delete("/users/%s" % users[name]["id"])
    print(json.dumps({"serviceProject": project["id"]}))


# ---------------------------------------------------------------- resources

def image():
    glance = client("image")
    name = CFG["image"]
    for img in glance.get("/v2/images", params={"name": name}).json()["images"]:
        if img["status"] == "active":
            return img["id"]
        # An upload interrupted by an earlier run leaves a queued image behind.
        glance.delete("/v2/images/%s" % img["id"])
    img = glance.post("/v2/images", json={"name": name, "disk_format": "raw", "container_format": "bare",
                                          "visibility": "public", "min_disk": 0, "min_ram": 0}).json()
    glance.put("/v2/images/%s/file" % img["id"], data=b"\0" * (1 << 20),
               headers={"Content-Type": "application/octet-stream"})
    return img["id"]


def networks():
    net = client("network")

    def find(kind, key, **params):
        return one(net.get("/v2.0/%s" % kind, params=params).json()[kind], "%s %s" % (key, params))

    def ensure(kind, key, body, **params):
        return find(kind, key, **params) or net.post("/v2.0/%s" % kind, json={key: body}).json()[key]

    pub = CFG["external"]
    public = ensure("networks", "network", {"name": pub["name"], "router:external": True, "shared": False,
                                            "provider:network_type": "flat",
                                            "provider:physical_network": pub["physnet"]}, name=pub["name"])
    ensure("subnets", "subnet", {"name": pub["subnet"], "network_id": public["id"], "ip_version": 4,
                                 "cidr": pub["cidr"], "gateway_ip": pub["gateway"], "enable_dhcp": False,
                                 "allocation_pools": [{"start": pub["pool_start"], "end": pub["pool_end"]}]},
           name=pub["subnet"], network_id=public["id"])
    ten = CFG["tenant"]
    private = ensure("networks", "network", {"name": ten["name"], "shared": True}, name=ten["name"])
    subnet = ensure("subnets", "subnet", {"name": ten["subnet"], "network_id": private["id"], "ip_version": 4,
                                          "cidr": ten["cidr"], "gateway_ip": ten["gateway"], "enable_dhcp": True},
                    name=ten["subnet"], network_id=private["id"])
    router = ensure("routers", "router", {"name": CFG["router"],
                                          "external_gateway_info": {"network_id": public["id"]}},
                    name=CFG["router"])
    if not net.get("/v2.0/ports", params={"device_id": router["id"], "network_id": private["id"]}).json()["ports"]:
        net.put("/v2.0/routers/%s/add_router_interface" % router["id"], json={"subnet_id": subnet["id"]})
    return {"public": public["id"], "private": private["id"], "router": router["id"]}


def wait(what, check, timeout=180):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            if check():
                return
        except (ks_exc.ClientException, KeyError) as e:
            last = e
        time.sleep(1)
    raise SystemExit("timed out waiting for %s (last error: %s)" % (what, last))


def ironic_up():
    ironic = client("baremetal", "1.78")
    return any(d["name"] == "fake-hardware" for d in ironic.get("/v1/drivers").json()["drivers"])


def resources():
    out = {"image": image()}
    out.update(networks())
    wait("ironic conductor with fake-hardware", ironic_up)
    print(json.dumps(out))


if __name__ == "__main__":
    {"identity": identity, "resources": resources}[sys.argv[1]]()
