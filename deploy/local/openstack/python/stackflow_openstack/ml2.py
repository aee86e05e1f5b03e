"""An agentless ML2 mechanism driver for the local stack.

The stack runs no Neutron agents, so no agent-based driver could bind a port and Nova would fail every
boot. This driver binds any port on any host to the first segment it is offered, with VIF type ovs, and
marks it ACTIVE: addressing, routers and floating IPs stay real Neutron database state.
"""

from neutron_lib.api.definitions import portbindings
from neutron_lib import constants
from neutron_lib.plugins.ml2 import api


class BindAnyMechanismDriver(api.MechanismDriver):
    """Binds every port to its first segment without an agent."""

    def initialize(self):
        pass

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_OVS,
                {portbindings.CAP_PORT_FILTER: False, portbindings.OVS_HYBRID_PLUG: False},
                status=constants.PORT_STATUS_ACTIVE)
            return
