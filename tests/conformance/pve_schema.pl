#!/usr/bin/perl
# Test helper: qemu-server's config schema through Proxmox's own PVE::JSONSchema (pve-oracle libs).
#   pve_schema.pl dump            the schema of every config key (types, ranges, enums, patterns)
#   pve_schema.pl hostpci         the sub-options of a hostpciN value (PCI.pm's format)
#   pve_schema.pl validate        JSON lines {"key":..,"value":..} -> {"ok":0|1,"error":..}
use strict;
use warnings;
my $ROOT;
BEGIN {
    $ROOT = $ENV{PVE_ORACLE_ROOT} or die "PVE_ORACLE_ROOT is not set\n";
    unshift @INC, map { "$ROOT/$_" } qw(
        stubs gen pve-common/src pve-cluster/src pve-guest-common/src
        pve-storage/src qemu-server/src pve-apiclient/src pve-firewall/src
    );
}
use PVEOracleEnv;
use JSON;
use PVE::JSONSchema;
use PVE::QemuServer;
use PVE::QemuServer::Machine;

my $json = JSON->new->canonical->allow_nonref;
my $props = PVE::QemuServer::json_config_properties({});
my $mode = shift @ARGV // 'dump';
if ($mode eq 'dump') {
    my $out = {};
    for my $key (sort keys %$props) {
        my $p = $props->{$key};
        my $d = { type => $p->{type} };
        for my $k (qw(minimum maximum maxLength pattern enum)) {
            $d->{$k} = $p->{$k} if defined $p->{$k};
        }
        if (defined(my $f = $p->{format})) {
            $d->{format} = ref($f) ? 'property-string' : $f;
        }
        $out->{$key} = $d;
    }
    print $json->encode($out), "\n";
    exit 0;
}
if ($mode eq 'hostpci') {
    my $fmt = PVE::JSONSchema::get_format('pve-qm-hostpci');
    print $json->encode([sort keys %$fmt]), "\n";
    exit 0;
}
$| = 1;
my $schema = { type => 'object', additionalProperties => 0, properties => $props };
while (my $line = <STDIN>) {
    my $req = decode_json($line);
    my $param = { $req->{key} => $req->{value} };
    eval { PVE::JSONSchema::validate($param, $schema, "invalid parameter\n") };
    my $err = $@;
    my $res = { ok => $err ? 0 : 1 };
    if ($err) {
        $res->{error} = ref($err) && $err->{errors} ? $err->{errors} : "$err";
    } elsif ($req->{key} eq 'machine') {
        # update_vm_api checks the machine's sub-options after the schema (API2/Qemu.pm)
        eval {
            my $conf = PVE::QemuServer::Machine::parse_machine($req->{value});
            PVE::QemuServer::Machine::assert_valid_machine_property($conf);
        };
        $res = { ok => 0, error => "$@", die => 1 } if $@;
    }
    print $json->encode($res), "\n";
}
