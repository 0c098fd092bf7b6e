#!/usr/bin/env python3
"""An S3 server on loopback for the tests and benches: moto in server mode
(pip install 'moto[server]'), with AWS Signature V4 enforced.

Usage: s3-test-server.py PORT [--open]
(--open: authentication stays off, for the benchmark to compare signed and
unsigned requests against the same server.)

moto checks signatures only once its IAM authentication is on
(INITIAL_NO_AUTH_ACTION_COUNT, here 0 after set-up): every request must then
be signed with a key moto issued, and a session's requests must carry its
token. moto never expires a session by itself, so this launcher (which
shares moto's process and backends) can revoke one, as a platform does when
it rotates a token: the old key is then refused (InvalidAccessKeyId).

Prints one JSON line when ready, then answers commands on standard input,
one per line, with one JSON line each:
  session                  a new session: {"id", "secret", "token"}
  revoke ID                forgets session ID: its requests are refused
  put BUCKET KEY FILE      uploads FILE (the bucket is made when missing)
  quit
"""
import json
import sys

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin
from moto.sts.models import sts_backends
import boto3

ACCOUNT = "123456789012"
POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:*", "sts:AssumeRole"], "Resource": "*"}]})


def main():
    port = int(sys.argv[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    anonymous = dict(endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id="setup", aws_secret_access_key="setup")
    iam = boto3.client("iam", **anonymous)
    iam.create_user(UserName="fleet")
    iam.put_user_policy(UserName="fleet", PolicyName="all", PolicyDocument=POLICY)
    key = iam.create_access_key(UserName="fleet")["AccessKey"]
    iam.create_role(RoleName="reader", AssumeRolePolicyDocument=POLICY)
    iam.put_role_policy(RoleName="reader", PolicyName="all", PolicyDocument=POLICY)
    # From here on every request must be signed with a key moto issued.
    if "--open" not in sys.argv[2:]:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        ActionAuthenticatorMixin.request_count = 0
    user = dict(endpoint_url=endpoint, region_name="us-east-1",
                aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
    s3 = boto3.client("s3", **user)
    sts = boto3.client("sts", **user)
    print(json.dumps({"ready": True, "port": port, "id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}),
          flush=True)
    buckets = set()
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "session":
                c = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/reader",
                                    RoleSessionName="fleet")["Credentials"]
                reply = {"id": c["AccessKeyId"], "secret": c["SecretAccessKey"], "token": c["SessionToken"]}
            elif words[0] == "revoke":
                for backend in sts_backends[ACCOUNT].values():
                    backend.assumed_roles = [r for r in backend.assumed_roles if r.access_key_id != words[1]]
                reply = {"ok": True}
            elif words[0] == "put":
                bucket, key_name, path = words[1], words[2], words[3]
                if bucket not in buckets:
                    s3.create_bucket(Bucket=bucket)
                    buckets.add(bucket)
                with open(path, "rb") as f:
                    # Open: readable unsigned too (moto checks ACLs then).
                    extra = {"ACL": "public-read"} if "--open" in sys.argv[2:] else {}
                    s3.put_object(Bucket=bucket, Key=key_name, Body=f.read(), **extra)
                reply = {"ok": True}
            elif words[0] == "quit":
                break
            else:
                reply = {"error": "unknown command"}
        except Exception as e:  # one line back, the test shows it
            reply = {"error": str(e)}
        print(json.dumps(reply), flush=True)
    server.stop()


if __name__ == "__main__":
    main()
