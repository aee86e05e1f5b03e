"""WSGI entry point for every OpenStack API of the local stack, served by uwsgi.

uwsgi loads this file with --wsgi-file; STACKFLOW_WSGI_APP names the service and
STACKFLOW_CONFIG_FILES lists its configuration files (';'-separated). Each service's own loader is
called the way its packaged wsgi script would, but with explicit configuration files instead of /etc.
"""

import os
import sys

APP = os.environ["STACKFLOW_WSGI_APP"]
FILES = [f for f in os.environ.get("STACKFLOW_CONFIG_FILES", "").split(";") if f]
ARGV = [APP]
for f in FILES:
    ARGV += ["--config-file", f]
sys.argv = list(ARGV)


def _load():
    if APP == "keystone":
        os.environ["OS_KEYSTONE_CONFIG_FILES"] = ";".join(FILES)
        from keystone.server.wsgi import initialize_public_application
        return initialize_public_application()
    if APP == "placement":
        os.environ["OS_PLACEMENT_CONFIG_DIR"] = os.path.dirname(FILES[0])
        from placement import wsgi
        return wsgi.init_application()
    if APP == "glance":
        os.environ["OS_GLANCE_CONFIG_DIR"] = os.path.dirname(FILES[0])
        from glance.common import wsgi_app
        return wsgi_app.init_app()
    if APP == "nova":
        os.environ["OS_NOVA_CONFIG_DIR"] = os.path.dirname(FILES[0])
        os.environ["OS_NOVA_CONFIG_FILES"] = ";".join(os.path.basename(f) for f in FILES)
        from nova.api.openstack.compute import wsgi
        return wsgi.init_application()
    if APP == "ironic":
        from ironic.api import wsgi
        return wsgi.initialize_wsgi_app(argv=list(ARGV))
    raise RuntimeError("unknown STACKFLOW_WSGI_APP %r" % APP)


application = _load()
