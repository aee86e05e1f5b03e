{{/* Scripts the charts' containers run, as the data of the chart's <release>-bin ConfigMap (mounted at
     /tmp/bin). */}}
{{- define "stackflow.scripts" -}}
# Runs a command and, when it fails, makes its first error line the container's termination message,
# which stackflow shows when the release fails (Python prints interpreter-exit noise after the error).
run.sh: |
  #!/bin/sh
  log=/tmp/run-$$.log
  "$@" >"$log" 2>&1
  rc=$?
  cat "$log" >&2
  if [ "$rc" -ne 0 ]; then
    { grep -m1 -E " CRITICAL | ERROR |denied|Error: " "$log" || tail -n 3 "$log"; } | cut -c1-1000 >/dev/termination-log
  fi
  rm -f "$log"
  exit "$rc"
# Creates the database and its user (when missing; an existing user's password is left alone) and
# grants it the database, as the administrator of the Secret endpoints.oslo_db.auth.admin.secret.
db-init.py: |
  import os, re, sys
  import pymysql
  db, user, pw = os.environ["DB_NAME"], os.environ["DB_USER"], os.environ["DB_PASSWORD"]
  for n in (db, user):
      if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", n):
          sys.exit(f"database and user names are letters, digits and _ only: {n!r}")
  c = pymysql.connect(host=os.environ["DB_HOST"], port=int(os.environ["DB_PORT"]), user=os.environ["ADMIN_USER"],
                      password=os.environ["ADMIN_PASSWORD"], connect_timeout=10)
  with c.cursor() as cur:
      cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8")
      cur.execute("SELECT COUNT(*) FROM mysql.user WHERE User=%s AND Host='%%'", (user,))
      if cur.fetchone()[0] == 0:
          cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, pw))
          print(f"created user {user}")
      cur.execute(f"GRANT ALL PRIVILEGES ON `{db}`.* TO %s@'%%'", (user,))
  c.commit()
  print(f"database {db} ready for {user}")
# Drops the database and its user (the pre-delete hook, manifests.job_db_drop). The API still runs then,
# and its pooled connections would hold the tables' metadata locks that DROP DATABASE waits for: the
# user is locked first (no new connection) and its connections are ended.
db-drop.py: |
  import os, re, sys
  import pymysql
  db, user = os.environ["DB_NAME"], os.environ["DB_USER"]
  for n in (db, user):
      if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", n):
          sys.exit(f"database and user names are letters, digits and _ only: {n!r}")
  c = pymysql.connect(host=os.environ["DB_HOST"], port=int(os.environ["DB_PORT"]), user=os.environ["ADMIN_USER"],
                      password=os.environ["ADMIN_PASSWORD"], connect_timeout=10)
  with c.cursor() as cur:
      cur.execute("SELECT COUNT(*) FROM mysql.user WHERE User=%s AND Host='%%'", (user,))
      if cur.fetchone()[0]:
          cur.execute("ALTER USER %s@'%%' ACCOUNT LOCK", (user,))
      cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER=%s", (user,))
      for (pid,) in cur.fetchall():
          try:
              cur.execute("KILL CONNECTION %s", (pid,))
          except pymysql.err.OperationalError:
              pass  # it ended on its own meanwhile
      cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
      cur.execute("DROP USER IF EXISTS %s@'%%'", (user,))
  c.commit()
  print(f"dropped database {db} and user {user}")
# The message bus's vhost and user, through RabbitMQ's management API as the administrator: `init`
# creates them (an existing user's password is set to the Secret's, so a lost user comes back as the
# release knows it) and grants the user the vhost; `drop` deletes both (the pre-delete hook).
mq.py: |
  import base64, json, os, sys, urllib.error, urllib.parse, urllib.request
  e = os.environ
  base = e["MQ_ADMIN_URL"].rstrip("/") + "/api"
  auth = "Basic " + base64.b64encode(("%s:%s" % (e["MQ_ADMIN_USER"], e["MQ_ADMIN_PASSWORD"])).encode()).decode()
  vhost, user = urllib.parse.quote(e["MQ_VHOST"], safe=""), urllib.parse.quote(e["MQ_USER"], safe="")
  def call(method, path, body=None, missing_ok=False):
      req = urllib.request.Request(base + path, method=method, headers={"Authorization": auth, "Content-Type": "application/json"},
                                   data=None if body is None else json.dumps(body).encode())
      try:
          urllib.request.urlopen(req, timeout=30).close()
      except urllib.error.HTTPError as err:
          if not (missing_ok and err.code == 404):
              sys.exit("Error: %s %s: %s %s" % (method, path, err.code, err.read()[:300].decode(errors="replace")))
  if sys.argv[1] == "init":
      call("PUT", "/vhosts/" + vhost)
      call("PUT", "/users/" + user, {"password": e["MQ_PASSWORD"], "tags": ""})
      call("PUT", "/permissions/%s/%s" % (vhost, user), {"configure": ".*", "write": ".*", "read": ".*"})
      print("vhost %s ready for %s" % (e["MQ_VHOST"], e["MQ_USER"]))
  else:
      call("DELETE", "/vhosts/" + vhost, missing_ok=True)
      call("DELETE", "/users/" + user, missing_ok=True)
      print("dropped vhost %s and user %s" % (e["MQ_VHOST"], e["MQ_USER"]))
# Waits until the database's schema is at the code's heads, so that the API starts on a migrated database
# only. `db_wait.py URL_VAR HEADS_COMMAND...`: the heads come once from the command (the image's own
# migrations), the database's revisions from its alembic_version table, read every second on one
# connection. A service's own check (`<service>-manage db ...`) imports the whole service each time and
# took 2.5-5 s of CPU per try, from the releases being set up beside it. A database that refuses the
# credentials fails at once, with the reason; DB_WAIT_SECONDS bounds the wait (default 300).
db_wait.py: |
  import os, subprocess, sys, time
  from urllib.parse import unquote, urlsplit
  import pymysql
  heads = set(subprocess.run(sys.argv[2:], check=True, capture_output=True, text=True).stdout.split())
  if not heads:
      sys.exit("Error: %s printed no schema head" % " ".join(sys.argv[2:]))
  u = urlsplit(os.environ[sys.argv[1]])
  where = "%s/%s" % (u.hostname, u.path.lstrip("/"))
  deadline, conn, last = time.monotonic() + float(os.environ.get("DB_WAIT_SECONDS", "300")), None, None
  while True:
      try:
          if conn is None:
              conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=unquote(u.username or ""),
                                     password=unquote(u.password or ""), database=u.path.lstrip("/"),
                                     connect_timeout=5, autocommit=True)
          with conn.cursor() as cur:
              cur.execute("SELECT version_num FROM alembic_version")
              have = {r[0] for r in cur.fetchall()}
          state = "schema at %s, code at %s" % (" ".join(sorted(have)) or "nothing", " ".join(sorted(heads)))
          if heads <= have:
              print("database %s: %s" % (where, state))
              sys.exit(0)
      except pymysql.MySQLError as err:
          if err.args and err.args[0] == 1045:
              sys.exit("Error: database %s: Access denied: %s" % (where, err))
          state = str(err)
          if conn is not None and err.args and err.args[0] != 1146:  # else the table is yet to come
              try:
                  conn.close()
              except Exception:
                  pass
              conn = None
      if state != last:
          print("waiting for database %s: %s" % (where, state), flush=True)
          last = state
      if time.monotonic() > deadline:
          sys.exit("Error: database %s: %s" % (where, state))
      time.sleep(1)
# Prints the schema heads of a package's alembic migrations: `alembic_heads.py PACKAGE DIR [BRANCH]`, DIR
# relative to the package. Keystone and Neutron name theirs in versions/EXPAND_HEAD and CONTRACT_HEAD
# (their revisions sit in directories per release, which alembic finds through their own settings);
# the others' come from alembic's script directory, BRANCH's head only when given.
alembic_heads.py: |
  import importlib.util, os, sys
  d = os.path.join(importlib.util.find_spec(sys.argv[1]).submodule_search_locations[0], sys.argv[2])
  files = [os.path.join(d, "versions", f) for f in ("EXPAND_HEAD", "CONTRACT_HEAD")]
  if all(os.path.exists(f) for f in files):
      print("\n".join(open(f).read().strip() for f in files))
  else:
      from alembic.script import ScriptDirectory
      script = ScriptDirectory(d)
      print(script.revision_map.get_current_head(sys.argv[3]) if len(sys.argv) > 3 else "\n".join(script.get_heads()))
# Waits, as a dependency init container does, until Keystone issues a user a token: Keystone is up and
# bootstrapped, and the user registered. Run as a script, the user is keystonemiddleware's
# (OS_KEYSTONE_AUTHTOKEN__*), so an API starts once its registration is done. KEYSTONE_WAIT_SECONDS
# bounds the wait (default 300); the error of the last try is the reason it gives up.
ks_wait.py: |
  import os, sys, time

  def wait(s, url, user):
      deadline, last = time.monotonic() + float(os.environ.get("KEYSTONE_WAIT_SECONDS", "300")), None
      while True:
          try:
              s.get_token()
              return
          except Exception as err:
              if time.monotonic() > deadline:
                  sys.exit(f"Keystone at {url} issued no token to {user}: {err}")
              if str(err) != last:
                  print(f"waiting for Keystone at {url} to issue {user} a token: {err}", flush=True)
                  last = str(err)
              time.sleep(1)

  if __name__ == "__main__":
      from keystoneauth1 import session
      from keystoneauth1.identity import v3
      e = {k[len("OS_KEYSTONE_AUTHTOKEN__"):]: v for k, v in os.environ.items() if k.startswith("OS_KEYSTONE_AUTHTOKEN__")}
      if "$(" in e["AUTH_URL"]:
          sys.exit(f"AUTH_URL {e['AUTH_URL']}: the Service it names did not exist when the pod started; set the endpoint's host_fqdn_override")
      s = session.Session(timeout=30, auth=v3.Password(
          auth_url=e["AUTH_URL"], username=e["USERNAME"], password=e["PASSWORD"], project_name=e["PROJECT_NAME"],
          user_domain_name=e["USER_DOMAIN_NAME"], project_domain_name=e["PROJECT_DOMAIN_NAME"]))
      wait(s, e["AUTH_URL"], e["USERNAME"])
      print(f"Keystone at {e['AUTH_URL']} issues {e['USERNAME']} a token")
# Creates what bootstrap.structured lists (BOOTSTRAP, JSON) through the service's API at SERVICE_URL, as
# Keystone's administrator of the environment (OS_*), once the API answers; each is found by name first,
# so a re-run creates nothing twice. images (the image API): uploaded from source_url, or, without one,
# size zero bytes (default 1 MiB): a placeholder for a hypervisor that reads no image (Nova's fake
# driver). networks (the network API): a network with its subnets (external, flat or VLAN on a physical
# network where asked); routers: a router with its gateway on an external network and an interface on
# each subnet named. BOOTSTRAP_WAIT_SECONDS bounds the wait for the API (default 300).
bootstrap.py: |
  import json, os, sys, time, urllib.request
  from keystoneauth1 import session
  from keystoneauth1.identity import v3
  import ks_wait
  e = os.environ
  s = session.Session(timeout=60, auth=v3.Password(
      auth_url=e["OS_AUTH_URL"], username=e["OS_USERNAME"], password=e["OS_PASSWORD"],
      project_name=e["OS_PROJECT_NAME"], user_domain_name=e["OS_USER_DOMAIN_NAME"],
      project_domain_name=e["OS_PROJECT_DOMAIN_NAME"]))
  want, api = json.loads(e["BOOTSTRAP"]), e["SERVICE_URL"].rstrip("/")
  if "$(" in api:
      sys.exit(f"SERVICE_URL {api}: the Service it names did not exist when the pod started")
  ks_wait.wait(s, e["OS_AUTH_URL"], e["OS_USERNAME"])
  probe = {"image": "/v2/images", "network": "/v2.0/networks"}[e["SERVICE_TYPE"]]
  deadline, last = time.monotonic() + float(e.get("BOOTSTRAP_WAIT_SECONDS", "300")), None
  while True:
      try:
          s.get(api + probe + "?limit=1")
          break
      except Exception as err:
          if time.monotonic() > deadline:
              sys.exit(f"the {e['SERVICE_TYPE']} API at {api} did not answer: {err}")
          if str(err) != last:
              print(f"waiting for the {e['SERVICE_TYPE']} API at {api}: {err}", flush=True)
              last = str(err)
          time.sleep(2)

  def named(path, key, name, **params):
      found = s.get(api + path, params=dict(params, name=name)).json()[key]
      return found[0] if found else None

  for key, im in sorted((want.get("images") or {}).items()):
      name = im.get("name") or key
      image = named("/v2/images", "images", name)
      if image is None:
          body = {"name": name, "container_format": im.get("container_format", "bare"), "disk_format": im.get("disk_format", "raw"),
                  "visibility": "private" if im.get("private") else "public", "min_disk": int(im.get("min_disk", 0))}
          image = s.post(api + "/v2/images", json=body).json()
      if image["status"] == "active":
          print(f"image {name} ({image['id']}) is there", flush=True)
          continue
      if image["status"] != "queued":
          sys.exit(f"image {name} ({image['id']}) is {image['status']}: delete it to have it made again")
      data = urllib.request.urlopen(im["source_url"], timeout=300).read() if im.get("source_url") else bytes(int(im.get("size", 1 << 20)))
      s.put(api + "/v2/images/%s/file" % image["id"], data=data, headers={"Content-Type": "application/octet-stream"})
      print(f"image {name} ({image['id']}) uploaded, {len(data)} bytes", flush=True)

  subnets = {}
  for key, nw in sorted((want.get("networks") or {}).items()):
      name = nw.get("name") or key
      net = named("/v2.0/networks", "networks", name)
      if net is None:
          body = {"name": name, "shared": bool(nw.get("shared", False))}
          if nw.get("external"):
              body["router:external"] = True
          if nw.get("network_type"):
              body["provider:network_type"] = nw["network_type"]
          if nw.get("physical_network"):
              body["provider:physical_network"] = nw["physical_network"]
          net = s.post(api + "/v2.0/networks", json={"network": body}).json()["network"]
      for skey, sub in sorted((nw.get("subnets") or {}).items()):
          sname = sub.get("name") or skey
          found = named("/v2.0/subnets", "subnets", sname, network_id=net["id"])
          if found is None:
              body = {"name": sname, "network_id": net["id"], "ip_version": 4, "cidr": sub["cidr"], "enable_dhcp": bool(sub.get("enable_dhcp", True))}
              if sub.get("gateway_ip"):
                  body["gateway_ip"] = sub["gateway_ip"]
              if sub.get("allocation_pools"):
                  body["allocation_pools"] = sub["allocation_pools"]
              found = s.post(api + "/v2.0/subnets", json={"subnet": body}).json()["subnet"]
          subnets[sname] = found
      print(f"network {name} ({net['id']}) is there", flush=True)

  # A router found by name gains what it lacks (its gateway, an interface), so an edit of the list
  # takes effect on a re-run.
  for key, r in sorted((want.get("routers") or {}).items()):
      name = r.get("name") or key
      router = named("/v2.0/routers", "routers", name)
      if router is None:
          router = s.post(api + "/v2.0/routers", json={"router": {"name": name}}).json()["router"]
      if r.get("external_network") and not router.get("external_gateway_info"):
          ext = named("/v2.0/networks", "networks", r["external_network"])
          if ext is None:
              sys.exit(f"router {name}: its external network {r['external_network']} does not exist")
          s.put(api + "/v2.0/routers/%s" % router["id"], json={"router": {"external_gateway_info": {"network_id": ext["id"]}}})
      ports = s.get(api + "/v2.0/ports", params={"device_id": router["id"]}).json()["ports"]
      attached = {ip["subnet_id"] for p in ports for ip in p.get("fixed_ips", [])}
      for sname in r.get("interfaces") or []:
          sub = subnets.get(sname) or named("/v2.0/subnets", "subnets", sname)
          if sub is None:
              sys.exit(f"router {name}: its subnet {sname} does not exist")
          if sub["id"] not in attached:
              s.put(api + "/v2.0/routers/%s/add_router_interface" % router["id"], json={"subnet_id": sub["id"]})
      print(f"router {name} ({router['id']}) is there", flush=True)
# Registers a service in Keystone, idempotently, as the administrator of the environment (OS_*): its
# user (password set to the one given, so a regenerated or rotated password takes effect) with a role
# in the service project, the service, and its endpoints in the region (a changed URL is updated).
ks-register.py: |
  import os, sys
  from keystoneauth1 import session
  from keystoneauth1.identity import v3
  import ks_wait
  e = os.environ
  for k in ("OS_AUTH_URL", "SERVICE_URL"):
      if "$(" in e[k]:
          sys.exit(f"{k} {e[k]}: the Service it names did not exist when the pod started; set the endpoint's host_fqdn_override")
  s = session.Session(timeout=30, auth=v3.Password(
      auth_url=e["OS_AUTH_URL"], username=e["OS_USERNAME"], password=e["OS_PASSWORD"],
      project_name=e["OS_PROJECT_NAME"], user_domain_name=e["OS_USER_DOMAIN_NAME"],
      project_domain_name=e["OS_PROJECT_DOMAIN_NAME"]))
  base = e["OS_AUTH_URL"].rstrip("/")

  # The chart may be installed beside Keystone's (stackflow starts it once keystone's release is applied).
  ks_wait.wait(s, base, e["OS_USERNAME"])

  def one(path, key, **params):
      found = s.get(base + path, params=params).json()[key]
      return found[0] if found else None

  # Another chart's registration may create the same project, role or region at the same moment (they
  # wait for the same Keystone): a conflict means it exists now, and is read back.
  def ensure(path, key, body, **params):
      found = one(path, key, **params)
      if found:
          return found
      r = s.post(base + path, json={key[:-1]: body}, raise_exc=False)
      if r.status_code == 409:
          return one(path, key, **params)
      r.raise_for_status()
      return r.json()[key[:-1]]

  region = e["SERVICE_REGION"]
  if s.get(base + "/regions/" + region, raise_exc=False).status_code == 404:
      r = s.post(base + "/regions", json={"region": {"id": region}}, raise_exc=False)
      if r.status_code != 409:
          r.raise_for_status()
  user_domain = one("/domains", "domains", name=e["SERVICE_USER_DOMAIN_NAME"])["id"]
  project_domain = one("/domains", "domains", name=e["SERVICE_PROJECT_DOMAIN_NAME"])["id"]
  project = ensure("/projects", "projects", {"name": e["SERVICE_PROJECT_NAME"], "domain_id": project_domain},
                   name=e["SERVICE_PROJECT_NAME"], domain_id=project_domain)
  user = one("/users", "users", name=e["SERVICE_USERNAME"], domain_id=user_domain)
  if user:
      s.patch(base + "/users/" + user["id"], json={"user": {"password": e["SERVICE_PASSWORD"], "enabled": True}})
  else:
      user = s.post(base + "/users", json={"user": {"name": e["SERVICE_USERNAME"], "domain_id": user_domain,
                                                   "password": e["SERVICE_PASSWORD"]}}).json()["user"]
  role = ensure("/roles", "roles", {"name": e["SERVICE_ROLE"]}, name=e["SERVICE_ROLE"])
  s.put(base + "/projects/%s/users/%s/roles/%s" % (project["id"], user["id"], role["id"]))
  service = ensure("/services", "services", {"type": e["SERVICE_TYPE"], "name": e["SERVICE_NAME"], "enabled": True},
                   type=e["SERVICE_TYPE"])
  for iface in ("admin", "internal", "public"):
      url = e["SERVICE_URL"]
      ep = one("/endpoints", "endpoints", service_id=service["id"], interface=iface, region_id=region)
      if ep is None:
          s.post(base + "/endpoints", json={"endpoint": {"service_id": service["id"], "interface": iface,
                                                         "region_id": region, "url": url, "enabled": True}})
      elif ep["url"] != url:
          s.patch(base + "/endpoints/" + ep["id"], json={"endpoint": {"url": url}})
  print("registered %s (%s) at %s in %s, user %s" % (e["SERVICE_NAME"], e["SERVICE_TYPE"], e["SERVICE_URL"], region, e["SERVICE_USERNAME"]))
{{- end -}}
