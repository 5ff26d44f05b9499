; a policy, a block, a nested item (tier, band, transition), an adapt rule and a list fold
[ (policy) (block) (item) (rule) (list) ] @fold
