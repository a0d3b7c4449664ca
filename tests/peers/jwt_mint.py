"""Mints RS256 JWTs with PyJWT for tests/it/identity.rs, and writes the JWKS that verifies them.

usage: jwt_mint.py <dir> <claims JSON>
The first run in <dir> makes an RSA key (key.pem) and its JWKS (jwks.json, kid "k1"); every run
prints one token signed with it. Claims "exp"/"nbf"/"iat" given as offsets from now (seconds)
under "exp_in" / "nbf_in"; the algorithm under "alg" (default RS256: "PS256" signs with the
same RSA key, which its JWKS marks RS256).
"""
import json
import os
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KID = "k1"


def main() -> None:
    folder, claims = sys.argv[1], json.loads(sys.argv[2])
    key_path = os.path.join(folder, "key.pem")
    if not os.path.exists(key_path):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        with open(key_path, "wb") as f:
            f.write(pem)
        jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
        jwk.update({"kid": KID, "alg": "RS256", "use": "sig"})
        with open(os.path.join(folder, "jwks.json"), "w") as f:
            json.dump({"keys": [jwk]}, f)
    with open(key_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    now = int(time.time())
    claims["iat"] = now
    claims["exp"] = now + claims.pop("exp_in", 300)
    if "nbf_in" in claims:
        claims["nbf"] = now + claims.pop("nbf_in")
    kid = claims.pop("kid", KID)
    alg = claims.pop("alg", "RS256")
    print(jwt.encode(claims, key, algorithm=alg, headers={"kid": kid}))


main()
