
beam me up"HXeÍÌL?€