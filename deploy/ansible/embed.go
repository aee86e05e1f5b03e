// Package ansible ships stackflow's own playbooks for EDPM data-plane nodes. They are embedded in the
// worker binary, which writes them to a private directory at start, so a worker always runs the
// playbooks of its own version.
//
// Phase 0 (infrastructure): bootstrap.yml, configure-network.yml, configure-os.yml, and ovn.yml for nodes
// that join an OVN southbound database (ovn-remove.yml when such a node is deleted).
// Phase 1 (services): nova-compute.yml (and nova-compute-remove.yml on teardown), ovn-metadata-agent.yml
// (and ovn-metadata-agent-remove.yml).
// Updates (OpenStackDataPlaneUpdate): nova-compute-checkpoint.yml, nova-compute-update.yml,
// nova-compute-rollback.yml; vars/nova-compute.yml says where nova-compute and the update's files live.
//
// Every playbook runs against one host (the node) and appends one line per run to
// /var/log/stackflow/edpm-steps.log on that host, the host's own record of what ran there. Variables
// they read:
//
//	stackflow_step, stackflow_run   the step's name and the activity's run ID (set by the activity)
//	stackflow_files                 config files the activity rendered: [{src, dest, mode}]
//	edpm_network_attachments, edpm_management_network   (node/role)
//	edpm_bootstrap_command, edpm_network_config_command, edpm_os_command   optional shell commands the
//	                                role or node adds to a step (site-specific preparation)
//	edpm_sysctl                     map of sysctl settings written to the host's sysctl file
//	edpm_python                     the Python running OpenStack services (default /usr/bin/python3)
//	edpm_ovn_sb_connection          the OVN southbound database the host joins (ovn.yml, the metadata
//	                                agent); edpm_ovn_encap_ip its tunnel address (default ansible_host)
//	stackflow_checkpoint            the name of an update's checkpoint on the host
//	stackflow_nova_version, stackflow_nova_version_class   the release an update installs and the
//	                                Placement resource class nova-compute reports it as
//
// A playbook reports values back to the worker by setting facts named stackflow_out_<name>.
package ansible

import "embed"

// Playbooks holds the playbooks and their shared task files.
//
//go:embed *.yml tasks/*.yml vars/*.yml callback_plugins/*.py
var Playbooks embed.FS
