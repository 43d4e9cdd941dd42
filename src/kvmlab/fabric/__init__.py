"""The host side of a lab's network: the vswitch (testpmd or OVS-DPDK), its huge pages, the
lab's private networks and the network namespaces that hold them."""
