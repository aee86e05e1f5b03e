package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The local cloud's OVN, from Debian's ovn-central, ovn-host and openvswitch-switch: the northbound and
// southbound databases (ovsdb-server each) and ovn-northd, and the stack's own chassis, the gateway of
// the cloud's routers (an ovsdb-server, ovs-vswitchd on the userspace datapath and ovn-controller). Neutron's
// ML2 uses the OVN mechanism driver: it writes the northbound database and binds a port only on a
// host that is a chassis in the southbound one. The EDPM test hosts become chassis through their `ovn`
// step (deploy/ansible/ovn.yml), reaching the southbound database on the hosts' gateway.
//
// Everything lives under <state>/openstack/ovn: databases, sockets, control sockets (OVS_RUNDIR and
// OVN_RUNDIR point there, so nothing is written under /run or /var).

// Ports of the OVN databases (OVN's standard ones); both listen on loopback and on the hosts' gateway.
const (
	OVNNorthboundPort = 6641
	OVNSouthboundPort = 6642
)

// OVNSouthbound is the southbound database as a test host reaches it: what a node's edpm_ovn_sb_connection
// names on this stack.
var OVNSouthbound = fmt.Sprintf("tcp:%s:%d", HostGateway, OVNSouthboundPort)

// Process names of the OVN part of the stack.
const (
	procOVNNB      = "ovn-nb"
	procOVNSB      = "ovn-sb"
	procOVNNorthd  = "ovn-northd"
	procOVSDB      = "ovs-db"
	procOVSSwitchd = "ovs-vswitchd"
	procOVNCtl     = "ovn-controller"
)

func (o *osEnv) ovnDir(parts ...string) string {
	return filepath.Join(append([]string{o.Dir, "ovn"}, parts...)...)
}

// ovnEnv points OVS's and OVN's tools at the stack's run directory.
func (o *osEnv) ovnEnv() []string {
	run := o.ovnDir("run")
	return []string{"OVS_RUNDIR=" + run, "OVN_RUNDIR=" + run, "OVS_DBDIR=" + o.ovnDir("db"), "OVS_LOGDIR=" + o.ovnDir("log")}
}

// NB and SB are the databases' addresses for services on this machine.
func (o *osEnv) NB() string { return fmt.Sprintf("tcp:127.0.0.1:%d", OVNNorthboundPort) }
func (o *osEnv) SB() string { return fmt.Sprintf("tcp:127.0.0.1:%d", OVNSouthboundPort) }

// upOVN starts OVN's databases and northd, then the gateway chassis. Idempotent.
func (o *osEnv) upOVN(ctx context.Context) error {
	if err := mkdirs(o.ovnDir("db"), o.ovnDir("run"), o.ovnDir("log")); err != nil {
		return err
	}
	dbs := []struct{ proc, file, schema, db string }{
		{procOVNNB, "ovnnb.db", "/usr/share/ovn/ovn-nb.ovsschema", "OVN_Northbound"},
		{procOVNSB, "ovnsb.db", "/usr/share/ovn/ovn-sb.ovsschema", "OVN_Southbound"},
		{procOVSDB, "conf.db", "/usr/share/openvswitch/vswitch.ovsschema", "Open_vSwitch"},
	}
	for _, d := range dbs {
		file := o.ovnDir("db", d.file)
		if err := ovsdbCreate(ctx, file, d.schema); err != nil {
			return err
		}
		argv := []string{"/usr/sbin/ovsdb-server", "--no-chdir",
			"--unixctl=" + o.ovnDir("run", d.proc+".ctl"),
			"--remote=punix:" + o.ovnDir("run", d.proc+".sock"),
		}
		switch d.proc {
		case procOVNNB:
			argv = append(argv, fmt.Sprintf("--remote=ptcp:%d:127.0.0.1", OVNNorthboundPort))
		case procOVNSB:
			argv = append(argv, fmt.Sprintf("--remote=ptcp:%d:127.0.0.1", OVNSouthboundPort),
				fmt.Sprintf("--remote=ptcp:%d:%s", OVNSouthboundPort, HostGateway))
		}
		if _, err := o.s.Start(Proc{Name: d.proc, Argv: append(argv, file), Env: o.ovnEnv()}); err != nil {
			return err
		}
	}
	for _, d := range dbs {
		sock := o.ovnDir("run", d.proc+".sock")
		if err := o.s.WaitFor(ctx, d.proc+" ready", d.proc, 100*time.Millisecond, func(ctx context.Context) error {
			_, err := o.ovnCmd(ctx, "ovsdb-client", "list-dbs", "unix:"+sock)
			return err
		}); err != nil {
			return err
		}
	}
	if _, err := o.s.Start(Proc{Name: procOVNNorthd, Env: o.ovnEnv(), Argv: []string{"/usr/bin/ovn-northd", "--no-chdir",
		"--unixctl=" + o.ovnDir("run", procOVNNorthd+".ctl"),
		"--ovnnb-db=unix:" + o.ovnDir("run", procOVNNB+".sock"),
		"--ovnsb-db=unix:" + o.ovnDir("run", procOVNSB+".sock")}}); err != nil {
		return err
	}
	return o.upLocalChassis(ctx)
}

// upLocalChassis makes this machine an OVN chassis, the gateway of the cloud's routers (OVN schedules
// a router's gateway port only to a chassis that offers itself as one).
func (o *osEnv) upLocalChassis(ctx context.Context) error {
	db := "unix:" + o.ovnDir("run", procOVSDB+".sock")
	if _, err := o.ovnCmd(ctx, "ovs-vsctl", "--db="+db, "--no-wait", "--", "init", "--", "set", "Open_vSwitch", ".",
		"external_ids:system-id="+o.GatewayHost, "external_ids:hostname="+o.GatewayHost,
		"external_ids:ovn-remote="+o.SB(), "external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=127.0.0.1",
		"external_ids:ovn-bridge-datapath-type=netdev",
		"external_ids:ovn-bridge-mappings="+o.Physnet+":br-ex",
		// The gateway chassis of the cloud's routers: the one chassis always present.
		"external_ids:ovn-cms-options=enable-chassis-as-gw"); err != nil {
		return err
	}
	if _, err := o.s.Start(Proc{Name: procOVSSwitchd, Env: o.ovnEnv(), Argv: []string{"/usr/sbin/ovs-vswitchd", "--no-chdir",
		"--unixctl=" + o.ovnDir("run", procOVSSwitchd+".ctl"), db}}); err != nil {
		return err
	}
	if _, err := o.ovnCmd(ctx, "ovs-vsctl", "--db="+db, "--no-wait", "--may-exist", "add-br", "br-ex", "--",
		"set", "Bridge", "br-ex", "datapath_type=netdev"); err != nil {
		return err
	}
	// ovn-controller has no --unixctl: its control socket is OVN_RUNDIR/ovn-controller.<pid>.ctl.
	if _, err := o.s.Start(Proc{Name: procOVNCtl, Env: o.ovnEnv(), Argv: []string{"/usr/bin/ovn-controller", "--no-chdir", db}}); err != nil {
		return err
	}
	sb := "unix:" + o.ovnDir("run", procOVNSB+".sock")
	return o.s.WaitFor(ctx, "local chassis registered", procOVNCtl, 200*time.Millisecond, func(ctx context.Context) error {
		out, err := o.ovnCmd(ctx, "ovn-sbctl", "--db="+sb, "--bare", "--columns=name", "find", "Chassis", "hostname="+o.GatewayHost)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			return errors.New("no chassis for " + o.GatewayHost + " yet")
		}
		return nil
	})
}

// ovsdbCreate creates an OVSDB file from its schema unless it exists.
func ovsdbCreate(ctx context.Context, file, schema string) error {
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "ovsdb-tool", "create", file, schema).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create %s: %w: %s", file, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ovnCmd runs one of OVS's or OVN's command-line tools against the stack's run directory.
func (o *osEnv) ovnCmd(ctx context.Context, name string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, append([]string{"--timeout=15"}, args...)...)
	if name == "ovsdb-client" {
		cmd = exec.CommandContext(cctx, name, args...)
	}
	cmd.Env = append(os.Environ(), o.ovnEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
