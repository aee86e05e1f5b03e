package local

import "context"

// upOpenStack starts MariaDB, RabbitMQ and the OpenStack services from Debian's packages on loopback.
func (s *Stack) upOpenStack(ctx context.Context) error {
	return nil // TODO(openstack helper)
}
