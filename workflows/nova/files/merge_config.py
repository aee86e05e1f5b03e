#!/usr/bin/python3
"""Nova's configuration merge, run by the init container of every stackflow Nova pod.

  merge CONFIG_DIR SECRETS_DIR OUT   merge CONFIG_DIR's *.conf and *.conf.tmpl files in name order (a
                                     later file's option wins) into OUT; *.tmpl files are filled first:
                                     ${raw:SECRET/KEY} is SECRETS_DIR/SECRET/KEY as is, ${url:SECRET/KEY}
                                     the same escaped for a URL. Other files (api-paste.ini) are copied
                                     beside OUT.
  get CONF SECTION OPTION            print one option of a merged file
  cell NAME DB_URL                   read `nova-manage cell_v2 list_cells --verbose` on stdin and print
                                     "missing", "same UUID" (NAME is mapped to DB_URL's database) or
                                     "other UUID HOST/DB" (NAME is mapped to another database)
"""
import os
import re
import shutil
import sys
import urllib.parse

REF = re.compile(r"\$\{(raw|url):([^/}]+)/([^}]+)\}")


def parse(text):
    sections = {}
    cur, last = None, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if raw[0] in " \t" and cur is not None and last is not None:
            sections[cur][last] += "\n" + line
            continue
        if line.startswith("[") and line.endswith("]"):
            cur, last = line[1:-1].strip(), None
            sections.setdefault(cur, {})
            continue
        m = re.match(r"([^=:]+?)\s*[=:]\s*(.*)$", line)
        if m and cur is not None:
            last = m.group(1).strip()
            sections[cur][last] = m.group(2)
    return sections


def fill(text, secrets_dir):
    def value(m):
        mode, secret, key = m.groups()
        path = os.path.join(secrets_dir, secret, key)
        try:
            with open(path) as f:
                v = f.read()
        except OSError:
            sys.exit("merge_config: Secret %s has no key %s (not mounted at %s)" % (secret, key, path))
        if v.endswith("\n"):
            v = v[:-1]
        return urllib.parse.quote(v, safe="") if mode == "url" else v
    return REF.sub(value, text)


def render(sections):
    out = []
    names = sorted(sections, key=lambda s: (s != "DEFAULT", s))
    for name in names:
        out.append("[%s]" % name)
        for k, v in sections[name].items():
            out.append("%s = %s" % (k, v.replace("\n", "\n    ")))
        out.append("")
    return "\n".join(out)


def merge(config_dir, secrets_dir, out):
    merged = {}
    for name in sorted(os.listdir(config_dir)):
        path = os.path.join(config_dir, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        if name.endswith(".conf") or name.endswith(".conf.tmpl"):
            with open(path) as f:
                text = f.read()
            if name.endswith(".tmpl"):
                text = fill(text, secrets_dir)
            for section, opts in parse(text).items():
                merged.setdefault(section, {}).update(opts)
        else:
            shutil.copyfile(path, os.path.join(os.path.dirname(out), name))
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# Merged by stackflow's merge_config.py from %s: defaults, credentials, customServiceConfig (wins).\n" % config_dir)
        f.write(render(merged))


def get(conf, section, option):
    with open(conf) as f:
        print(parse(f.read())[section][option])


def database(url):
    u = urllib.parse.urlsplit(url)
    return "%s:%s%s" % (u.hostname, u.port or 3306, u.path)


def cell(name, want):
    for line in sys.stdin:
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) >= 4 and cols[0] == name:
            uuid, conn = cols[1], cols[3]
            if database(conn) == database(want):
                print("same " + uuid)
            else:
                print("other %s %s" % (uuid, database(conn)))
            return
    print("missing")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "merge" and len(sys.argv) == 5:
        merge(*sys.argv[2:])
    elif cmd == "get" and len(sys.argv) == 5:
        get(*sys.argv[2:])
    elif cmd == "cell" and len(sys.argv) == 4:
        cell(*sys.argv[2:])
    else:
        sys.exit(__doc__)
