#include "vmm/devices/virtio_devices.h"
#include "common/err.h"
#include <errno.h>
int virtio_net_add(struct vm *vm, const char *tap, const char *mac) { (void)vm; (void)tap; (void)mac; return errf(ENOSYS, "net: not yet"); }
int virtio_vsock_add(struct vm *vm, uint32_t cid, const char *p) { (void)vm; (void)cid; (void)p; return errf(ENOSYS, "vsock: not yet"); }
